package parking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/internal/pgschema"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
)

// queue is one queue of parked messages: a consumer group's record key on
// one partition of a topic. A message without a key is alone.
type queue struct {
	group, topic string
	partition    int32
	key          []byte
}

func queueOf(p *middleware.Parked) queue {
	return queue{group: p.Group, topic: p.Position.Topic, partition: p.Position.Partition, key: p.Position.Key}
}

// lock takes q's transaction-scoped advisory lock, so that the queue's
// changes take turns.
func (q queue) lock(ctx context.Context, tx pgx.Tx) error {
	name := q.group + "\x1f" + q.topic + "\x1f" + strconv.Itoa(int(q.partition)) + "\x1f" + fmt.Sprintf("%x", q.key)
	_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::int4, hashtext($2))", pgschema.ClassParked, name)
	return err
}

// queueState is what a queue holds: whether any message, and whether the
// record at an offset.
func (s *Store) queueState(ctx context.Context, tx pgx.Tx, q queue, offset int64) (busy, parked bool, err error) {
	if q.key == nil {
		return false, false, nil
	}
	err = tx.QueryRow(ctx, `SELECT count(*) > 0, coalesce(bool_or("offset" = $5), false) FROM `+s.table+
		` WHERE consumer_group = $1 AND topic = $2 AND "partition" = $3 AND key = $4`,
		q.group, q.topic, q.partition, q.key, offset).Scan(&busy, &parked)
	return busy, parked, err
}

// inQueue runs fn in a transaction that holds p's queue.
func (s *Store) inQueue(ctx context.Context, p *middleware.Parked, fn func(tx pgx.Tx, q queue) error) error {
	q := queueOf(p)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := q.lock(ctx, tx); err != nil {
			return err
		}
		return fn(tx, q)
	})
	switch {
	case dataException(err):
		// Not a message this table can keep, however often it tries.
		return koto.Poison(fmt.Errorf("parking: %s: %w", s.table, err))
	case err != nil:
		return fmt.Errorf("parking: %s: %w", s.table, err)
	}
	return nil
}

// dataException reports PostgreSQL's class 22: a value the table cannot
// hold, such as a NUL in a text column.
func dataException(err error) bool {
	var state interface{ SQLState() string }
	return errors.As(err, &state) && strings.HasPrefix(state.SQLState(), "22")
}

// ParkedKeys returns the record keys of topic's partition that have
// messages parked for group.
func (s *Store) ParkedKeys(ctx context.Context, group, topic string, partition int32) ([][]byte, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT key FROM `+s.table+
		` WHERE consumer_group = $1 AND topic = $2 AND "partition" = $3 AND key IS NOT NULL`, group, topic, partition)
	if err == nil {
		var keys [][]byte
		keys, err = pgx.CollectRows(rows, pgx.RowTo[[]byte])
		if err == nil {
			return keys, nil
		}
	}
	return nil, fmt.Errorf("parking: keys of %s/%d for %s in %s: %w", topic, partition, group, s.table, err)
}

// Park parks p: an entry Load returned is parked again, a new one goes
// last in its queue (see middleware.ParkingStore). The first of a queue
// is scheduled to come back at p.DueAt through the outbox, in the same
// transaction.
func (s *Store) Park(ctx context.Context, p *middleware.Parked) error {
	return s.inQueue(ctx, p, func(tx pgx.Tx, q queue) error {
		var old *string
		err := tx.QueryRow(ctx, `SELECT schedule_id FROM `+s.table+` WHERE id = $1`, p.ID).Scan(&old)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return s.insert(ctx, tx, q, p)
		case err != nil:
			return err
		}
		if err := s.cancel(ctx, tx, old); err != nil {
			return err
		}
		sid, err := s.schedule(ctx, tx, p.DueAt, p.Position.Topic, p.Message)
		if err != nil {
			return err
		}
		history, err := json.Marshal(p.History)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE `+s.table+` SET parkings = $2, history = $3, due_at = $4, schedule_id = $5 WHERE id = $1`,
			p.ID, p.Parkings, history, p.DueAt, sid)
		return err
	})
}

// ParkBehind parks p last in its queue if the queue has messages, and
// says whether it did, or found p's record parked already.
func (s *Store) ParkBehind(ctx context.Context, p *middleware.Parked) (parked bool, err error) {
	err = s.inQueue(ctx, p, func(tx pgx.Tx, q queue) error {
		busy, there, err := s.queueState(ctx, tx, q, p.Position.Offset)
		switch {
		case err != nil:
			return err
		case there:
			parked = true
			return nil
		case !busy:
			return nil
		}
		parked = true
		return s.insertRow(ctx, tx, q, p, nil, nil)
	})
	return parked, err
}

// insert inserts p last in its queue, scheduled at p.DueAt if it is the
// first; a record parked already is left as it is.
func (s *Store) insert(ctx context.Context, tx pgx.Tx, q queue, p *middleware.Parked) error {
	busy, there, err := s.queueState(ctx, tx, q, p.Position.Offset)
	if err != nil || there {
		return err
	}
	if busy {
		return s.insertRow(ctx, tx, q, p, nil, nil)
	}
	sid, err := s.schedule(ctx, tx, p.DueAt, q.topic, p.Message)
	if err != nil {
		return err
	}
	return s.insertRow(ctx, tx, q, p, &p.DueAt, &sid)
}

func (s *Store) insertRow(ctx context.Context, tx pgx.Tx, q queue, p *middleware.Parked, due *time.Time, sid *string) error {
	history, err := json.Marshal(p.History)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO `+s.table+` (id, consumer_group, topic, "partition", key, "offset",
    message_uuid, payload, metadata, parkings, history, due_at, schedule_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		p.ID, q.group, q.topic, q.partition, q.key, p.Position.Offset,
		p.Message.UUID, p.Message.Payload, map[string]string(p.Message.Metadata), p.Parkings, history, due, sid)
	return err
}

// Load returns group's parked entry id, ok false when there is none.
func (s *Store) Load(ctx context.Context, group, id string) (*middleware.Parked, bool, error) {
	e, err := s.entry(ctx, "id = $1 AND consumer_group = $2", id, group)
	switch {
	case err != nil:
		return nil, false, s.explain("load "+id, err)
	case e == nil:
		return nil, false, nil
	}
	return &e.Parked, true, nil
}

// entry reads the entry where cond holds, nil when none does.
func (s *Store) entry(ctx context.Context, cond string, args ...any) (*Entry, error) {
	rows, err := s.pool.Query(ctx, selectEntry+s.table+" WHERE "+cond, args...)
	if err != nil {
		return nil, err
	}
	entries, err := pgx.CollectRows(rows, scanEntry)
	if err != nil || len(entries) == 0 {
		return nil, err
	}
	return &entries[0], nil
}

// Release removes p and schedules the next of its queue to come back now.
func (s *Store) Release(ctx context.Context, p *middleware.Parked) error {
	return s.inQueue(ctx, p, func(tx pgx.Tx, q queue) error {
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.table+` WHERE id = $1`, p.ID); err != nil || q.key == nil {
			return err
		}
		return s.lead(ctx, tx, q)
	})
}

// lead schedules the first of q to come back now, unless it is scheduled
// already.
func (s *Store) lead(ctx context.Context, tx pgx.Tx, q queue) error {
	rows, err := tx.Query(ctx, selectEntry+s.table+
		` WHERE consumer_group = $1 AND topic = $2 AND "partition" = $3 AND key = $4 ORDER BY seq LIMIT 1`,
		q.group, q.topic, q.partition, q.key)
	if err != nil {
		return err
	}
	first, err := pgx.CollectRows(rows, scanEntry)
	if err != nil || len(first) == 0 || !first[0].DueAt.IsZero() {
		return err
	}
	now := time.Now()
	sid, err := s.schedule(ctx, tx, now, q.topic, first[0].Message)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE `+s.table+` SET due_at = $2, schedule_id = $3 WHERE id = $1`, first[0].ID, now, sid)
	return err
}

// schedule schedules msg to come back to topic at at, in tx.
func (s *Store) schedule(ctx context.Context, tx pgx.Tx, at time.Time, topic string, msg *message.Message) (string, error) {
	m := msg.Copy()
	m.SetContext(ctx)
	id, err := s.box.Publisher(tx).Schedule(at, topic, m)
	if err != nil {
		return "", fmt.Errorf("schedule its return to %s: %w", topic, err)
	}
	return id, nil
}

// cancel cancels the schedule sid, if any and not sent yet, in tx.
func (s *Store) cancel(ctx context.Context, tx pgx.Tx, sid *string) error {
	if sid == nil {
		return nil
	}
	err := s.box.Publisher(tx).Cancel(ctx, *sid)
	if err == nil || errors.Is(err, outbox.ErrSent) || errors.Is(err, outbox.ErrCancelled) || errors.Is(err, outbox.ErrUnknownSchedule) {
		return nil
	}
	return err
}
