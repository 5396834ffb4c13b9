package outbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/internal/pgtx"
	"github.com/koto-dev/watermill-koto/internal/scheduleid"
)

// Schedule writes msg into the outbox's schedule, for topic, due at at,
// and returns the schedule's ID, for [Publisher.Cancel]. It takes its
// transaction as Publish does, and like Publish it gives msg a UUID and a
// correlation ID when it has none and checks that Kafka can take it. The
// active forwarder moves it into the outbox once it is due, to the
// millisecond (see Scheduling in the package documentation); a time
// already past is due at once. The zero time is an error wrapping
// [ErrInvalidSchedule].
func (p *Publisher) Schedule(at time.Time, topic string, msg *message.Message) (string, error) {
	if at.IsZero() {
		return "", koto.Poison(fmt.Errorf("%w: the zero time; give the time the message is due", ErrInvalidSchedule))
	}
	if ms := at.UnixMilli(); ms >= scheduleid.MaxMillis {
		return "", koto.Poison(fmt.Errorf("%w: %s is later than a schedule can hold", ErrInvalidSchedule, at))
	}
	return p.schedule(at, topic, msg)
}

// ScheduleAfter is [Publisher.Schedule] at the time delay from now. A
// negative delay is an error wrapping [ErrInvalidSchedule]; zero is due at
// once.
func (p *Publisher) ScheduleAfter(delay time.Duration, topic string, msg *message.Message) (string, error) {
	if delay < 0 {
		return "", koto.Poison(fmt.Errorf("%w: the delay %v is negative; give a delay of zero or more", ErrInvalidSchedule, delay))
	}
	return p.Schedule(time.Now().Add(delay), topic, msg)
}

func (p *Publisher) schedule(at time.Time, topic string, msg *message.Message) (string, error) {
	if msg == nil {
		return "", koto.Poison(fmt.Errorf("%w: a nil message", ErrInvalidMessage))
	}
	msgs := []*message.Message{msg}
	if err := p.o.check(topic, msgs); err != nil {
		return "", err
	}
	id := newScheduleID(at)
	err := p.inTransactions(msgs, func(ctx context.Context, tx pgx.Tx, u *pgtx.Unit, _ []*message.Message) error {
		return p.o.writeScheduled(ctx, tx, u, id, at, topic, msg)
	})
	if errors.Is(err, ErrNoTransaction) {
		return "", fmt.Errorf("outbox: scheduling message %s for %s: %w", msg.UUID, topic, err)
	}
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// writeScheduled inserts msg into the scheduled table in tx, as the row
// the outbox will get when it is due, with a notification of its due
// time, in one round trip.
func (o *Outbox) writeScheduled(ctx context.Context, tx pgx.Tx, u *pgtx.Unit, id uuid.UUID, at time.Time, topic string, msg *message.Message) error {
	if ctx == nil {
		ctx = context.Background()
	}
	q, err := o.insertQuery(topic, msg)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO `+o.t.scheduled+` (id, due_at, uuid, payload, metadata) VALUES ($1, $2, $3, $4, $5)`,
		id, at, q.Args[0], q.Args[1], q.Args[2])
	b.Queue("SELECT pg_notify($1, $2)", o.t.channel, strconv.FormatInt(scheduleid.Millis(id), 10))
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return o.writeError(topic, 1, err)
	}
	if u != nil {
		u.Wrote(1)
	}
	return nil
}

// Cancel cancels the scheduled message id, which [Publisher.Schedule]
// returned, in the Publisher's transaction: that of ctx for
// [Outbox.ContextPublisher], its own for [Outbox.AutoTxPublisher] when ctx
// has none. Once that commits, the message is never sent. A message no
// longer scheduled is an error: one sent already wraps [ErrSent], one
// cancelled before [ErrCancelled], an ID this outbox does not know
// [ErrUnknownSchedule]. A Cancel that meets the forwarder moving the
// message waits for it, and then says [ErrSent].
func (p *Publisher) Cancel(ctx context.Context, id string) error {
	sid, err := uuid.Parse(id)
	if err != nil || sid.Version() != 7 {
		return fmt.Errorf("%w: %q is not a schedule ID", ErrUnknownSchedule, id)
	}
	cancel := func(ctx context.Context, tx pgx.Tx, _ *pgtx.Unit, _ []*message.Message) error {
		return p.o.cancel(ctx, tx, sid)
	}
	if p.tx != nil {
		return cancel(ctx, p.tx, nil, nil)
	}
	if u, ok := pgtx.From(ctx); ok {
		return cancel(ctx, u.Tx, u, nil)
	}
	if !p.auto {
		return fmt.Errorf("%w: Cancel of %s: ctx has no transaction; "+
			"cancel inside Outbox.Transact or a transactional handler, or use Outbox.Publisher(tx)", ErrNoTransaction, id)
	}
	return p.o.Transact(ctx, func(ctx context.Context, tx pgx.Tx) error { return cancel(ctx, tx, nil, nil) })
}

// cancel deletes the schedule id and records it as cancelled, or says what
// became of it. The second statement reads with a snapshot taken after the
// first, so that it sees a move the first waited for.
func (o *Outbox) cancel(ctx context.Context, tx pgx.Tx, id uuid.UUID) error {
	b := &pgx.Batch{}
	b.Queue(`WITH gone AS (DELETE FROM `+o.t.scheduled+` WHERE id = $1 RETURNING id)
INSERT INTO `+o.t.settled+` (id, cancelled) SELECT id, true FROM gone`, id)
	b.Queue(`SELECT cancelled FROM `+o.t.settled+` WHERE id = $1`, id)
	br := tx.SendBatch(ctx, b)
	tag, err := br.Exec()
	var cancelled *bool
	if err == nil {
		err = br.QueryRow().Scan(&cancelled)
		if err == pgx.ErrNoRows {
			err = nil
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return fmt.Errorf("outbox: cancel %s in %s: %w", id, o.t.scheduled, err)
	case tag.RowsAffected() == 1:
		return nil
	case cancelled == nil:
		return fmt.Errorf("%w: %s", ErrUnknownSchedule, id)
	case *cancelled:
		return fmt.Errorf("%w: %s", ErrCancelled, id)
	}
	return fmt.Errorf("%w: %s", ErrSent, id)
}

// newScheduleID returns a UUIDv7 whose time is at rounded up to the
// millisecond (see Scheduling in the package documentation), so that no
// message is sent before its time, and whose other bits are random.
func newScheduleID(at time.Time) uuid.UUID {
	var id uuid.UUID
	_, _ = rand.Read(id[6:]) // crypto/rand.Read never fails
	ms := at.UnixMilli()
	if at.After(time.UnixMilli(ms)) {
		ms++
	}
	scheduleid.SetMillis(&id, ms)
	id[6] = 0x70 | id[6]&0x0f // version 7
	id[8] = 0x80 | id[8]&0x3f // RFC 9562 variant
	return id
}

// boundID returns the greatest ID whose due time is at or before t, to the
// millisecond.
func boundID(t time.Time) uuid.UUID {
	var id uuid.UUID
	for i := range id {
		id[i] = 0xff
	}
	scheduleid.SetMillis(&id, t.UnixMilli())
	return id
}
