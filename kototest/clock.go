package kototest

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/internal/scheduleid"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/parking"
)

// Advance makes d, to the millisecond, pass for the messages scheduled in
// the harness's schema, parked ones included, and wakes the forwarder for
// those it makes due (see Time in the package documentation); a
// [Harness.Wait] after it waits until they are handled.
func (h *Harness) Advance(d time.Duration) {
	h.t.Helper()
	switch {
	case d < 0:
		h.t.Fatalf("kototest: Advance(%v): time does not go back; give a duration of zero or more", d)
	case h.pool == nil:
		h.t.Fatalf("kototest: Advance needs the harness's database; start it without WithoutPostgres")
	}
	d = d.Truncate(time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.timeout)
	defer cancel()
	h.mu.Lock()
	defer h.mu.Unlock()
	passed, err := h.advance(ctx, d)
	if err != nil {
		h.t.Fatalf("kototest: Advance(%v): %v", d, err)
	}
	h.passed = passed
}

// advance makes d pass for each scheduled message still waiting, on top
// of what earlier advances made pass for it, and makes due those whose
// due time that reaches. It returns what has passed for those still
// waiting.
func (h *Harness) advance(ctx context.Context, d time.Duration) (map[uuid.UUID]time.Duration, error) {
	boxes, err := outbox.FindTables(ctx, h.pool, h.schema)
	if err != nil {
		return nil, err
	}
	parked, err := parking.FindTables(ctx, h.pool, h.schema)
	if err != nil {
		return nil, err
	}
	passed := map[uuid.UUID]time.Duration{}
	err = pgx.BeginFunc(ctx, h.pool, func(tx pgx.Tx) error {
		var due dueNow
		for _, cfg := range boxes {
			if err := h.fireDue(ctx, tx, cfg, d, passed, &due); err != nil {
				return err
			}
		}
		return followParked(ctx, tx, parked, due)
	})
	return passed, err
}

// dueNow lists the scheduled messages an advance made due: their old and
// new schedule IDs, and their due times.
type dueNow struct {
	old, new []string
	at       []time.Time
}

// fireDue gives each scheduled message of one outbox that the time passed
// for it made due the due time it now has, in its schedule ID too, which
// is what the forwarder reads; records its old ID as sent, as it now is
// as good as sent; and notifies the forwarder of the earliest, as the
// commit of a schedule does.
func (h *Harness) fireDue(ctx context.Context, tx pgx.Tx, cfg outbox.Config, d time.Duration, passed map[uuid.UUID]time.Duration, due *dueNow) error {
	scheduled, settled := scheduleTables(cfg)
	rows, err := tx.Query(ctx, "SELECT id, due_at, statement_timestamp() FROM "+scheduled+" WHERE due_at > statement_timestamp() ORDER BY id FOR UPDATE")
	if err != nil {
		return err
	}
	waiting, err := pgx.CollectRows(rows, pgx.RowToStructByPos[scheduledRow])
	if err != nil {
		return err
	}
	var mine dueNow
	earliest := int64(math.MaxInt64)
	for _, r := range waiting {
		p := h.passed[r.ID] + d
		if r.Due.Add(-p).After(r.Now) {
			passed[r.ID] = p
			continue
		}
		ms := max(scheduleid.Millis(r.ID)-p.Milliseconds(), 0)
		id := r.ID
		scheduleid.SetMillis(&id, ms)
		mine.old = append(mine.old, r.ID.String())
		mine.new = append(mine.new, id.String())
		mine.at = append(mine.at, r.Due.Add(-p))
		earliest = min(earliest, ms)
	}
	if len(mine.old) == 0 {
		return nil
	}
	box, err := outbox.New(h.pool, cfg)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue("UPDATE "+scheduled+" AS s SET id = m.new::uuid, due_at = m.at"+
		" FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS m(old, new, at) WHERE s.id = m.old::uuid", mine.old, mine.new, mine.at)
	b.Queue("INSERT INTO "+settled+" (id, cancelled) SELECT old::uuid, false FROM unnest($1::text[]) AS old", mine.old)
	b.Queue("SELECT pg_notify($1, $2)", box.Channel(), strconv.FormatInt(earliest, 10))
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("outbox %s: %w", box.Table(), err)
	}
	due.old, due.new, due.at = append(due.old, mine.old...), append(due.new, mine.new...), append(due.at, mine.at...)
	return nil
}

// scheduledRow is a scheduled message waiting, as fireDue reads it, and
// the database's time.
type scheduledRow struct {
	ID  uuid.UUID
	Due time.Time
	Now time.Time
}

// followParked points the parked messages whose return an advance made
// due at their new schedule, with its due time, so that parking's
// operations (RunNow, DeadLetter) find it.
func followParked(ctx context.Context, tx pgx.Tx, tables []parking.Config, due dueNow) error {
	if len(due.old) == 0 {
		return nil
	}
	for _, cfg := range tables {
		table := pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize()
		_, err := tx.Exec(ctx, "UPDATE "+table+" AS p SET schedule_id = m.new, due_at = m.at"+
			" FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS m(old, new, at) WHERE p.schedule_id = m.old",
			due.old, due.new, due.at)
		if err != nil {
			return fmt.Errorf("parking table %s: %w", table, err)
		}
	}
	return nil
}

// scheduleTables names, quoted, the scheduled and settled tables of an
// outbox.
func scheduleTables(cfg outbox.Config) (scheduled, settled string) {
	return pgx.Identifier{cfg.Schema, cfg.Table + scheduleid.ScheduledSuffix}.Sanitize(), pgx.Identifier{cfg.Schema, cfg.Table + scheduleid.SettledSuffix}.Sanitize()
}
