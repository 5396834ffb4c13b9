package benchmarks

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/internal/retry"
	"github.com/koto-dev/watermill-koto/outbox"
)

// scheduleLead is how long before its due time the lateness benchmark
// schedules each message, and scheduleTick how often it commits the
// messages of the next tick.
const (
	scheduleLead = time.Second
	scheduleTick = 10 * time.Millisecond
)

// ScheduleLateness is how late scheduled messages were: from their due
// time to their Kafka record's timestamp (the produce, after the fire and
// the forward; milliseconds) and to their arrival at a Kafka consumer in
// this process.
type ScheduleLateness struct {
	Produced, Consumed OutboxLatency
}

// Lateness runs a forwarder and schedules n messages due evenly over
// spread, each committed scheduleLead before its due time, a tick's
// worth per transaction, and measures how late each one is.
func (b *Outbox) Lateness(ctx context.Context, n int, spread time.Duration) (ScheduleLateness, error) {
	topic, arrived, stopReading, err := b.topicRead(ctx, "lateness", n)
	if err != nil {
		return ScheduleLateness{}, err
	}
	defer stopReading()
	stop, err := b.startForwarder(ctx, OutboxVariant{notify: true})
	if err != nil {
		return ScheduleLateness{}, err
	}
	defer stop()
	due, err := b.schedulePaced(ctx, topic, n, spread)
	if err != nil {
		return ScheduleLateness{}, err
	}
	var recs map[string]arrival
	select {
	case recs = <-arrived:
	case <-ctx.Done():
		return ScheduleLateness{}, fmt.Errorf("lateness: waiting for the messages: %w", ctx.Err())
	}
	produced, consumed := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	for id, at := range due {
		produced = append(produced, recs[id].produced.Sub(at.Truncate(time.Millisecond)))
		consumed = append(consumed, recs[id].consumed.Sub(at))
	}
	return ScheduleLateness{Produced: summariseOutbox(produced), Consumed: summariseOutbox(consumed)}, nil
}

// schedulePaced schedules n messages for topic, due evenly over spread
// from scheduleLead on, committing at each tick those due a lead later,
// and returns their due times by UUID.
func (b *Outbox) schedulePaced(ctx context.Context, topic string, n int, spread time.Duration) (map[string]time.Time, error) {
	due := make(map[string]time.Time, n)
	start := time.Now().Add(scheduleLead)
	next := 0
	for tick := time.Now(); next < n; tick = tick.Add(scheduleTick) {
		if err := retry.Sleep(ctx, time.Until(tick)); err != nil {
			return nil, err
		}
		var msgs []*message.Message
		var at []time.Time
		for ; next < n; next++ {
			t := start.Add(time.Duration(next) * spread / time.Duration(n))
			if t.Sub(tick) >= scheduleLead+scheduleTick {
				break
			}
			msgs, at = append(msgs, b.newMessage(next)), append(at, t)
		}
		err := b.o.Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
			for i, msg := range msgs {
				if _, err := b.o.Publisher(tx).Schedule(at[i], topic, msg); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("schedule: %w", err)
		}
		for i, msg := range msgs {
			due[msg.UUID] = at[i]
		}
	}
	return due, nil
}

// arrival is when a record was produced (its timestamp) and consumed.
type arrival struct{ produced, consumed time.Time }

// topicRead makes a topic for one run, named after what, and reads it
// with readRecords.
func (b *Outbox) topicRead(ctx context.Context, what string, n int) (string, <-chan map[string]arrival, func(), error) {
	topic, err := b.newTopic(ctx, what)
	if err != nil {
		return "", nil, nil, err
	}
	arrived, stop, err := b.readRecords(topic, n)
	return topic, arrived, stop, err
}

// readRecords consumes topic from its start until n distinct messages
// arrived and then sends their arrivals by UUID. stop ends the reading.
func (b *Outbox) readRecords(topic string, n int) (<-chan map[string]arrival, func(), error) {
	out := make(chan map[string]arrival, 1)
	recs := make(map[string]arrival, n)
	stop, err := b.consume(topic, func(uuid string, rec *kgo.Record, now time.Time) bool {
		if _, seen := recs[uuid]; !seen {
			recs[uuid] = arrival{produced: rec.Timestamp, consumed: now}
		}
		if len(recs) == n {
			out <- recs
			return false
		}
		return true
	})
	return out, stop, err
}

// FireResult is how fast a forwarder moved a schedule of messages all due
// at once into its outbox, against a raw INSERT … SELECT of the same rows.
type FireResult struct {
	Messages int
	// Raw is the time of one INSERT … SELECT of the scheduled rows into
	// the outbox table: the baseline.
	Raw time.Duration
	// Fired is the time from the forwarder's start until the scheduled
	// table was empty; Forwarded until every message was in Kafka.
	Fired, Forwarded time.Duration
	// Left is the rows of the scheduled table afterwards, and Size the
	// bytes of it and its index, vacuumed.
	Left, Size int64
}

// FireRate and RawRate are messages per second.
func (r FireResult) FireRate() float64 { return float64(r.Messages) / r.Fired.Seconds() }
func (r FireResult) RawRate() float64  { return float64(r.Messages) / r.Raw.Seconds() }

// ForwardRate is messages per second into Kafka.
func (r FireResult) ForwardRate() float64 { return float64(r.Messages) / r.Forwarded.Seconds() }

// Fire fills the scheduled table with n messages for a new topic, all due
// already, with no forwarder running; times a raw INSERT … SELECT of them
// into the outbox table, which it then empties; then runs a forwarder
// until the schedule is empty and every message is in Kafka.
func (b *Outbox) Fire(ctx context.Context, n int) (FireResult, error) {
	r := FireResult{Messages: n}
	topic, err := b.newTopic(ctx, "fire")
	if err != nil {
		return r, err
	}
	if err := b.fillScheduled(ctx, topic, n); err != nil {
		return r, err
	}
	if r.Raw, err = b.timeExec(ctx, `INSERT INTO `+b.o.Table()+` (uuid, payload, metadata, transaction_id)
SELECT uuid, payload, metadata, pg_current_xact_id() FROM `+b.scheduled()+` ORDER BY id`); err != nil {
		return r, fmt.Errorf("raw INSERT … SELECT: %w", err)
	}
	if _, err := b.pool.Exec(ctx, "TRUNCATE "+b.o.Table()); err != nil {
		return r, err
	}
	f, err := outbox.NewForwarder(b.o, outbox.ForwarderConfig{Broker: broker.Config{Brokers: b.brokers}, Logger: b.logger})
	if err != nil {
		return r, err
	}
	start := time.Now()
	wait := run(f.Run)
	defer func() { _ = f.Close(); wait() }()
	for r.Forwarded == 0 {
		if err := retry.Sleep(ctx, 5*time.Millisecond); err != nil {
			return r, err
		}
		if r.Fired == 0 {
			var empty bool
			if err := b.pool.QueryRow(ctx, "SELECT NOT EXISTS (SELECT FROM "+b.scheduled()+")").Scan(&empty); err != nil {
				return r, err
			}
			if empty {
				r.Fired = time.Since(start)
			}
		}
		if f.Forwarded() >= int64(n) {
			r.Forwarded = time.Since(start)
		}
	}
	if _, err := b.pool.Exec(ctx, "VACUUM "+b.scheduled()); err != nil {
		return r, err
	}
	err = b.pool.QueryRow(ctx, "SELECT count(*), pg_total_relation_size($1::regclass) FROM "+b.scheduled(), b.scheduled()).Scan(&r.Left, &r.Size)
	return r, err
}

// scheduled is the outbox's scheduled table.
func (b *Outbox) scheduled() string {
	return pgx.Identifier{b.schema, "outbox_scheduled"}.Sanitize()
}

// fillScheduled writes n scheduled messages for topic, due a minute ago,
// in one statement: the rows a Schedule of b.newMessage(i) would write,
// but for their UUIDv4s.
func (b *Outbox) fillScheduled(ctx context.Context, topic string, n int) error {
	due := time.Now().Add(-time.Minute)
	_, err := b.pool.Exec(ctx, `INSERT INTO `+b.scheduled()+` (id, due_at, uuid, payload, metadata)
SELECT (lpad(to_hex($1::bigint), 12, '0') || '70008' || lpad(to_hex(i), 15, '0'))::uuid, $2, u,
    json_build_object('destination_topic', $3::text, 'uuid', u, 'payload', $4::text,
        'metadata', json_build_object('partition_key', 'key-' || i % 16)),
    '{}'::json
FROM generate_series(1, $5::bigint) AS i, LATERAL (SELECT gen_random_uuid()::text AS u OFFSET 0) AS x`,
		due.UnixMilli(), due, topic, base64.StdEncoding.EncodeToString(b.payload), n)
	if err != nil {
		return fmt.Errorf("fill the schedule: %w", err)
	}
	_, err = b.pool.Exec(ctx, "ANALYZE "+b.scheduled())
	return err
}

// timeExec runs sql and returns how long it took.
func (b *Outbox) timeExec(ctx context.Context, sql string) (time.Duration, error) {
	start := time.Now()
	_, err := b.pool.Exec(ctx, sql)
	return time.Since(start), err
}
