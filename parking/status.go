package parking

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"

	"github.com/koto-dev/watermill-koto/internal/config"
	"github.com/koto-dev/watermill-koto/internal/pgschema"
	"github.com/koto-dev/watermill-koto/telemetry"
)

// Status is what a table holds parked for one consumer group.
type Status struct {
	// Table is the table as it appears in SQL, schema included.
	Table string
	// Group is the consumer group.
	Group string
	// Keys is the number of queues: the record keys with messages
	// parked, each message without a key counting as one.
	Keys int64
	// Messages is the number of messages parked.
	Messages int64
	// Oldest is when the oldest was parked.
	Oldest time.Time
	// NextDue is when the next comes back; zero when none is scheduled.
	NextDue time.Time
}

// Status reads what the table holds, per consumer group, in one
// read-only statement whose cost grows with the rows.
func (s *Store) Status(ctx context.Context) ([]Status, error) {
	rows, err := s.pool.Query(ctx, `SELECT consumer_group,
    count(DISTINCT (topic, "partition", coalesce(key, uuid_send(id)))), count(*), min(parked_at), min(due_at)
FROM `+s.table+` GROUP BY consumer_group ORDER BY consumer_group`)
	if err != nil {
		return nil, s.explain("status", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Status, error) {
		st := Status{Table: s.table}
		var next *time.Time
		err := row.Scan(&st.Group, &st.Keys, &st.Messages, &st.Oldest, &next)
		if next != nil {
			st.NextDue = *next
		}
		return st, err
	})
	if err != nil {
		return nil, s.explain("status", err)
	}
	return out, nil
}

// List returns the messages parked for group, at most limit of them,
// queue by queue, each queue's first first.
func (s *Store) List(ctx context.Context, group string, limit int) ([]Entry, error) {
	rows, err := s.pool.Query(ctx, selectEntry+s.table+
		` WHERE consumer_group = $1 ORDER BY topic, "partition", key, seq LIMIT $2`, group, limit)
	if err != nil {
		return nil, s.explain("list", err)
	}
	out, err := pgx.CollectRows(rows, scanEntry)
	if err != nil {
		return nil, s.explain("list", err)
	}
	return out, nil
}

// RunNow brings the parked message id back now, instead of at its time.
// One that waits behind another of its key is an error wrapping
// ErrNotFirst; an ID no longer parked, ErrNotParked.
func (s *Store) RunNow(ctx context.Context, id string) error {
	return s.operate(ctx, id, "run", false)
}

// DeadLetter brings the parked message id back now to be dead-lettered,
// without a handler call, by its consumer's dead-letter middleware, with
// its history; its key's next message follows. Errors as RunNow's.
func (s *Store) DeadLetter(ctx context.Context, id string) error {
	return s.operate(ctx, id, "dead-letter", true)
}

// operate schedules entry id to come back now, marked for its dead letter
// when deadLetter, cancelling the schedule it had.
func (s *Store) operate(ctx context.Context, id, what string, deadLetter bool) error {
	e, err := s.entry(ctx, "id = $1", id)
	switch {
	case err != nil:
		return s.explain(what+" "+id, err)
	case e == nil:
		return fmt.Errorf("%w: %s in %s", ErrNotParked, id, s.table)
	}
	return s.inQueue(ctx, &e.Parked, func(tx pgx.Tx, q queue) error {
		var sid *string
		err := tx.QueryRow(ctx, `SELECT schedule_id FROM `+s.table+` WHERE id = $1`, id).Scan(&sid)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("%w: %s", ErrNotParked, id)
		case err != nil:
			return err
		case sid == nil:
			return fmt.Errorf("%w: %s waits for the first message of its key", ErrNotFirst, id)
		}
		if err := s.cancel(ctx, tx, sid); err != nil {
			return err
		}
		now := time.Now()
		next, err := s.schedule(ctx, tx, now, q.topic, e.Message)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE `+s.table+` SET due_at = $2, schedule_id = $3, dead_letter = dead_letter OR $4 WHERE id = $1`,
			id, now, next, deadLetter)
		return err
	})
}

// explain wraps an error of what, telling a missing table.
func (s *Store) explain(what string, err error) error {
	if pgschema.UndefinedTable(err) {
		return fmt.Errorf("%w: %s: %w", ErrSchemaMissing, s.table, err)
	}
	return fmt.Errorf("parking: %s in %s: %w", what, s.table, err)
}

// columns are those of the table, by which FindTables recognises one.
var columns = []string{"id", "seq", "consumer_group", "topic", "partition", "key", "offset", "message_uuid",
	"payload", "metadata", "parkings", "history", "due_at", "schedule_id", "dead_letter", "parked_at"}

// FindTables returns the Config of every parking table in schema (default
// "koto"): each table with this package's columns, by name. Only tables
// the pool's role may see are found. The Configs have their other fields
// zero.
func FindTables(ctx context.Context, pool *pgxpool.Pool, schema string) ([]Config, error) {
	if schema == "" {
		schema = defaultSchema
	}
	p := config.For("parking.FindTables")
	pgschema.CheckName(p, "schema", schema, pgschema.MaxIdentifier)
	if err := p.Err(); err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.columns WHERE table_schema = $1
GROUP BY table_name HAVING array_agg(column_name::text) @> $2::text[] ORDER BY table_name`, schema, columns)
	if err == nil {
		var names []string
		if names, err = pgx.CollectRows(rows, pgx.RowTo[string]); err == nil {
			cfgs := make([]Config, len(names))
			for i, n := range names {
				cfgs[i] = Config{Schema: schema, Table: n}
			}
			return cfgs, nil
		}
	}
	return nil, fmt.Errorf("parking: find the parking tables of schema %s: %w", pgschema.QuoteIdent(schema), err)
}

// Observe reports the table's parked messages and keys, per consumer
// group, to tel at each collection of the metrics (koto.parked.messages,
// koto.parked.keys), reading Status. Unregister the registration when
// done.
func (s *Store) Observe(tel *telemetry.Telemetry) (metric.Registration, error) {
	return tel.ObserveParked(s.table, func(ctx context.Context) ([]telemetry.ParkedBacklog, error) {
		statuses, err := s.Status(ctx)
		out := make([]telemetry.ParkedBacklog, len(statuses))
		for i, st := range statuses {
			out[i] = telemetry.ParkedBacklog{Group: st.Group, Messages: st.Messages, Keys: st.Keys}
		}
		return out, err
	})
}
