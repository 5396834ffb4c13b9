package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/internal/scheduleid"
)

const (
	// pruneEvery is how often the active forwarder prunes the settled
	// table, and pruneBatch the most rows it deletes at a time.
	pruneEvery = time.Minute
	pruneBatch = 10_000
	// lockedPause is how long the forwarder waits before it tries again
	// to move a due message that a Cancel holds.
	lockedPause = 10 * time.Millisecond
)

// schedule is what the active forwarder knows of its table's schedule.
type schedule struct {
	next   time.Time // when the earliest scheduled message is due, to the millisecond; zero when none is
	after  uuid.UUID // while due messages fill batch after batch, the last one moved; else zero
	pruned time.Time // the last prune of the settled table
}

// until returns how long to wait at most, from now, for the next due
// message or d, whichever comes first.
func (s *schedule) until(now time.Time, d time.Duration) time.Duration {
	if s.next.IsZero() {
		return d
	}
	return max(min(s.next.Sub(now), d), 0)
}

// notified takes in a due time that a notification announced. One before
// the last message moved makes the next move start from the first.
func (s *schedule) notified(due time.Time) {
	if due.IsZero() {
		return
	}
	if s.next.IsZero() || due.Before(s.next) {
		s.next = due
	}
	if s.after != uuid.Nil && due.UnixMilli() <= scheduleid.Millis(s.after) {
		s.after = uuid.Nil
	}
}

// readNext reads when the earliest scheduled message is due.
func (f *Forwarder) readNext(ctx context.Context, conn *pgx.Conn, s *schedule) error {
	return f.query(ctx, func(ctx context.Context) error {
		next, err := scanNext(conn.QueryRow(ctx, f.sql.nextDue, uuid.Nil))
		s.next = next
		return err
	})
}

// scanNext reads the result of nextDue: a due time, or zero.
func scanNext(row pgx.Row) (time.Time, error) {
	var id uuid.UUID
	switch err := row.Scan(&id); {
	case errors.Is(err, pgx.ErrNoRows):
		return time.Time{}, nil
	case err != nil:
		return time.Time{}, fmt.Errorf("read the schedule: %w", err)
	}
	return time.UnixMilli(scheduleid.Millis(id)), nil
}

// tend moves the messages due now into the outbox, a batch at a time, and
// prunes the settled table now and then.
func (f *Forwarder) tend(ctx context.Context, conn *pgx.Conn, s *schedule) error {
	now := time.Now()
	if now.Sub(s.pruned) >= pruneEvery {
		n, err := f.pruneSettled(ctx, conn, now)
		if err != nil {
			return err
		}
		if n < pruneBatch { // else prune on at the next turn
			s.pruned = now
		}
	}
	if s.next.IsZero() || now.Before(s.next) {
		return nil
	}
	return f.fire(ctx, conn, s, now)
}

// moved is a scheduled message that fire moved into the outbox.
type moved struct {
	id  uuid.UUID
	due time.Time
}

// fire moves up to a batch of the messages due by now into the outbox, in
// one implicit transaction that also reads when the next one is due. While
// batches come full it goes on from the last message it moved: deleted
// rows stay in the index until a vacuum, and a scan from the start would
// step over all of them each time.
func (f *Forwarder) fire(ctx context.Context, conn *pgx.Conn, s *schedule, now time.Time) error {
	var (
		fired []moved
		next  time.Time
	)
	err := f.query(ctx, func(ctx context.Context) error {
		b := &pgx.Batch{}
		b.Queue(f.sql.fire, boundID(now), f.cfg.BatchSize, s.after)
		b.Queue(f.sql.nextDue, s.after)
		br := conn.SendBatch(ctx, b)
		rows, err := br.Query()
		if err == nil {
			fired, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (m moved, err error) {
				return m, row.Scan(&m.id, &m.due)
			})
		}
		if err == nil {
			next, err = scanNext(br.QueryRow())
		}
		return errors.Join(err, br.Close())
	})
	if err != nil {
		return fmt.Errorf("move the due scheduled messages into the outbox: %w", err)
	}
	done := time.Now()
	switch {
	case len(fired) == f.cfg.BatchSize: // more are due, likely
		s.after, s.next = lastID(fired), done
	case s.after != uuid.Nil: // caught up: once more from the first, for any passed over
		s.after, s.next = uuid.Nil, done
	case len(fired) == 0 && !next.IsZero() && !done.Before(next):
		s.next = done.Add(lockedPause) // what is due is held by a Cancel
	default:
		s.next = next
	}
	f.observeFired(ctx, fired, done)
	return nil
}

// lastID returns the greatest ID of ms.
func lastID(ms []moved) uuid.UUID {
	var last uuid.UUID
	for _, m := range ms {
		if bytes.Compare(m.id[:], last[:]) > 0 {
			last = m.id
		}
	}
	return last
}

// observeFired records how late each message of fired was, at done.
func (f *Forwarder) observeFired(ctx context.Context, fired []moved, done time.Time) {
	if len(fired) == 0 {
		return
	}
	late := make([]time.Duration, len(fired))
	for i, m := range fired {
		late[i] = done.Sub(m.due)
	}
	f.tel.ScheduleFired(ctx, f.o.t.outbox, late)
	f.log.LogAttrs(ctx, slog.LevelDebug, "outbox scheduled messages due", slog.Int("messages", len(fired)))
}

// pruneSettled deletes a batch of the settled rows due longer than
// ScheduleRetention ago and returns how many it deleted.
func (f *Forwarder) pruneSettled(ctx context.Context, conn *pgx.Conn, now time.Time) (int64, error) {
	var n int64
	err := f.query(ctx, func(ctx context.Context) error {
		tag, err := conn.Exec(ctx, f.sql.pruneSettled, boundID(now.Add(-f.cfg.ScheduleRetention)), pruneBatch)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune %s: %w", f.o.t.settled, err)
	}
	return n, nil
}

// dueOf returns the due time a notification's payload announces: a
// schedule's, in milliseconds since 1970; zero for other notifications.
func dueOf(payload string) time.Time {
	ms, err := strconv.ParseInt(payload, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
