package benchmarks

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/internal/retry"
	"github.com/koto-dev/watermill-koto/outbox"
)

// outboxFillBatch is how many messages Fill commits per transaction.
const outboxFillBatch = 500

// watermillTopic is the watermill-sql topic under which Watermill's
// components see the outbox table; the adapters map every topic to it.
const watermillTopic = "outbox"

// Outbox compares the outbox forwarder with Watermill's components/forwarder
// on a plain watermill-sql subscriber (its default settings: a poll every
// second, one message handed over and acked at a time), both over the same
// outbox table, producing with the broker package's settings (acks=all,
// idempotent). Make one with NewOutbox and Close it when done.
type Outbox struct {
	brokers []string
	pool    *pgxpool.Pool
	schema  string
	o       *outbox.Outbox
	prefix  string
	runs    int
	payload []byte
	logger  *slog.Logger
}

// NewOutbox sets the benchmark up in a new schema named prefix (a
// lower-case identifier), dropped by Close, on pool and brokers.
func NewOutbox(ctx context.Context, brokers []string, pool *pgxpool.Pool, prefix string) (*Outbox, error) {
	o, err := outbox.New(pool, outbox.Config{Schema: prefix})
	if err != nil {
		return nil, err
	}
	b := &Outbox{brokers: brokers, pool: pool, schema: prefix, o: o, prefix: prefix,
		payload: []byte(`{"order_id":"00000000-0000-0000-0000-000000000000","amount":10}`),
		logger:  slog.New(slog.DiscardHandler)}
	if err := o.Setup(ctx); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// Close drops the schema. The pool stays open.
func (b *Outbox) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{b.schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", b.schema, err)
	}
	return nil
}

// Table returns the outbox table's name.
func (b *Outbox) Table() string { return b.o.Table() }

// newTopic returns a topic for one run, created on the brokers.
func (b *Outbox) newTopic(ctx context.Context, what string) (string, error) {
	b.runs++
	topic := b.prefix + "." + what + "-" + strconv.Itoa(b.runs)
	return topic, broker.ProvisionTopics(ctx, broker.Config{Brokers: b.brokers}, topic)
}

// newMessage is a message with a UUIDv7 and one of 16 partition keys.
func (b *Outbox) newMessage(i int) *message.Message {
	msg := message.NewMessage(uuid.Must(uuid.NewV7()).String(), b.payload)
	msg.Metadata.Set(koto.PartitionKeyMetadataKey, "key-"+strconv.Itoa(i%16))
	return msg
}

// Fill commits n messages for a new topic into the table, outboxFillBatch
// per transaction, with no forwarder running, and returns the topic.
func (b *Outbox) Fill(ctx context.Context, n int) (string, error) {
	topic, err := b.newTopic(ctx, "throughput")
	if err != nil {
		return "", err
	}
	for start := 0; start < n; start += outboxFillBatch {
		msgs := make([]*message.Message, 0, outboxFillBatch)
		for i := start; i < n && i < start+outboxFillBatch; i++ {
			msgs = append(msgs, b.newMessage(i))
		}
		err := b.o.Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
			return b.o.Publisher(tx).Publish(topic, msgs...)
		})
		if err != nil {
			return "", fmt.Errorf("fill the outbox: %w", err)
		}
	}
	return topic, nil
}

// Forwarded is how many messages a forwarder forwarded in how long: from
// the end of its first unit of work (a batch, or a message for Watermill's
// forwarder) to the end of the last, so that neither's start-up counts and
// both are measured running.
type Forwarded struct {
	Messages int
	Time     time.Duration
}

// ForwardKoto runs this module's forwarder until it has forwarded n
// messages.
func (b *Outbox) ForwardKoto(ctx context.Context, n int) (Forwarded, error) {
	f, err := outbox.NewForwarder(b.o, outbox.ForwarderConfig{Broker: broker.Config{Brokers: b.brokers}, Logger: b.logger})
	if err != nil {
		return Forwarded{}, err
	}
	wait := run(f.Run)
	defer func() { _ = f.Close(); wait() }()
	var first int64
	var start time.Time
	for {
		done := f.Forwarded()
		if first == 0 && done > 0 {
			first, start = done, time.Now()
		}
		if done >= int64(n) {
			return Forwarded{Messages: int(done - first), Time: time.Since(start)}, nil
		}
		if err := retry.Sleep(ctx, 100*time.Microsecond); err != nil {
			return Forwarded{}, err
		}
	}
}

// ForwardWatermill runs Watermill's forwarder on a watermill-sql
// subscriber (consumer group "watermill") until it has forwarded n
// messages.
func (b *Outbox) ForwardWatermill(ctx context.Context, n int) (Forwarded, error) {
	counted := make(chan struct{})
	forwarded := 0
	var start time.Time
	count := func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			out, err := h(msg)
			if err == nil {
				if forwarded++; forwarded == 1 {
					start = time.Now()
				} else if forwarded == n {
					close(counted)
				}
			}
			return out, err
		}
	}
	fwd, closeAll, err := b.watermillForwarder(count)
	if err != nil {
		return Forwarded{}, err
	}
	wait := run(fwd.Run)
	defer func() { closeAll(); wait() }()
	select {
	case <-counted:
		return Forwarded{Messages: n - 1, Time: time.Since(start)}, nil
	case <-ctx.Done():
		return Forwarded{}, ctx.Err()
	}
}

// watermillForwarder builds Watermill's forwarder from the table to Kafka,
// with mw around its handler, and a function that closes it all.
func (b *Outbox) watermillForwarder(mw message.HandlerMiddleware) (*forwarder.Forwarder, func(), error) {
	sub, err := wsql.NewSubscriber(wsql.BeginnerFromPgx(b.pool), wsql.SubscriberConfig{
		ConsumerGroup:  "watermill",
		SchemaAdapter:  wsql.DefaultPostgreSQLSchema{GenerateMessagesTableName: func(string) string { return b.o.Table() }},
		OffsetsAdapter: wsql.DefaultPostgreSQLOffsetsAdapter{GenerateMessagesOffsetsTableName: func(string) string { return b.o.Table() + "_offsets" }},
	}, nil)
	if err != nil {
		return nil, nil, err
	}
	pub, err := broker.NewPublisher(broker.Config{Brokers: b.brokers})
	if err != nil {
		_ = sub.Close()
		return nil, nil, err
	}
	fwd, err := forwarder.NewForwarder(sub, pub, nil, forwarder.Config{
		ForwarderTopic: watermillTopic, Middlewares: []message.HandlerMiddleware{mw}, CloseTimeout: 10 * time.Second,
	})
	if err != nil {
		_ = sub.Close()
		_ = pub.Close()
		return nil, nil, err
	}
	return fwd, func() { _ = fwd.Close(); _ = sub.Close(); _ = pub.Close() }, nil
}

// run starts fn in a goroutine and returns a function that waits for it.
func run(fn func(context.Context) error) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = fn(context.Background())
	}()
	return func() { <-done }
}
