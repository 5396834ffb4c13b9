package benchmarks

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/internal/retry"
	"github.com/koto-dev/watermill-koto/outbox"
)

// OutboxVariant is one way of getting committed messages to Kafka.
type OutboxVariant struct {
	Name      string
	watermill bool // Watermill's forwarder, else this module's
	notify    bool // written by an outbox Publisher, which notifies; else by Watermill's forwarder publisher, which does not
}

// OutboxVariants are the latency variants: the outbox forwarder woken by
// NOTIFY, the outbox forwarder on its poll alone (messages written without
// a notification), and Watermill's forwarder on a watermill-sql subscriber
// with its default poll.
func OutboxVariants() []OutboxVariant {
	return []OutboxVariant{
		{Name: "outbox forwarder, NOTIFY", notify: true},
		{Name: "outbox forwarder, poll only"},
		{Name: "Watermill forwarder, poll", watermill: true},
	}
}

// OutboxLatency summarises commit-to-Kafka latencies.
type OutboxLatency struct {
	N             int
	P50, P99, Max time.Duration
}

// Latency starts the variant's forwarder, then commits n messages, one per
// transaction, one every interval whatever happens to the earlier ones (an
// open loop), and measures each from the return of its commit to its
// arrival at a Kafka consumer in this process.
func (b *Outbox) Latency(ctx context.Context, v OutboxVariant, n int, interval time.Duration) (OutboxLatency, error) {
	topic, arrived, stopReading, err := b.topicRead(ctx, "latency", n)
	if err != nil {
		return OutboxLatency{}, err
	}
	defer stopReading()
	stop, err := b.startForwarder(ctx, v)
	if err != nil {
		return OutboxLatency{}, err
	}
	defer stop()
	committed, err := b.commitPaced(ctx, v, topic, n, interval)
	if err != nil {
		return OutboxLatency{}, err
	}
	var at map[string]arrival
	select {
	case at = <-arrived:
	case <-ctx.Done():
		return OutboxLatency{}, fmt.Errorf("%s: waiting for the messages: %w", v.Name, ctx.Err())
	}
	lat := make([]time.Duration, 0, n)
	for id, t0 := range committed {
		lat = append(lat, at[id].consumed.Sub(t0))
	}
	return summariseOutbox(lat), nil
}

// startForwarder starts the variant's forwarder and returns once it
// forwards, with a function that stops it.
func (b *Outbox) startForwarder(ctx context.Context, v OutboxVariant) (stop func(), err error) {
	if v.watermill {
		fwd, closeAll, err := b.watermillForwarder(func(h message.HandlerFunc) message.HandlerFunc { return h })
		if err != nil {
			return nil, err
		}
		wait := run(fwd.Run)
		select {
		case <-fwd.Running():
		case <-ctx.Done():
		}
		return func() { closeAll(); wait() }, ctx.Err()
	}
	f, err := outbox.NewForwarder(b.o, outbox.ForwarderConfig{Broker: broker.Config{Brokers: b.brokers}, Logger: b.logger})
	if err != nil {
		return nil, err
	}
	wait := run(f.Run)
	for !f.Active() && ctx.Err() == nil {
		_ = retry.Sleep(ctx, time.Millisecond)
	}
	return func() { _ = f.Close(); wait() }, ctx.Err()
}

// commitPaced commits n messages to topic, one per transaction, starting
// one every interval, and returns when each commit returned, by UUID.
func (b *Outbox) commitPaced(ctx context.Context, v OutboxVariant, topic string, n int, interval time.Duration) (map[string]time.Time, error) {
	committed := make(map[string]time.Time, n)
	start := time.Now()
	for i := range n {
		if err := retry.Sleep(ctx, time.Until(start.Add(time.Duration(i)*interval))); err != nil {
			return nil, err
		}
		msg := b.newMessage(i)
		err := b.o.Transact(ctx, func(ctx context.Context, tx pgx.Tx) error {
			if v.notify {
				return b.o.Publisher(tx).Publish(topic, msg)
			}
			pub, err := wsql.NewPublisher(wsql.TxFromPgx(tx), wsql.PublisherConfig{
				SchemaAdapter: wsql.DefaultPostgreSQLSchema{GenerateMessagesTableName: func(string) string { return b.o.Table() }},
			}, nil)
			if err != nil {
				return err
			}
			msg.SetContext(ctx)
			return forwarder.NewPublisher(pub, forwarder.PublisherConfig{ForwarderTopic: watermillTopic}).Publish(topic, msg)
		})
		if err != nil {
			return nil, fmt.Errorf("%s: commit message %d: %w", v.Name, i, err)
		}
		committed[msg.UUID] = time.Now()
	}
	return committed, nil
}

// consume reads topic from its start on a goroutine of its own, handing
// each record's UUID, with the time its fetch arrived, to each, until each
// returns false or stop is called.
func (b *Outbox) consume(topic string, each func(uuid string, rec *kgo.Record, now time.Time) bool) (stop func(), err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		more := true
		for more && ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(rec *kgo.Record) {
				for _, h := range rec.Headers {
					if more && h.Key == kafka.UUIDHeaderKey {
						more = each(string(h.Value), rec, now)
					}
				}
			})
		}
	})
	return func() { cancel(); wg.Wait(); cl.Close() }, nil
}

func summariseOutbox(ds []time.Duration) OutboxLatency {
	if len(ds) == 0 {
		return OutboxLatency{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return OutboxLatency{N: len(ds), P50: at(0.50), P99: at(0.99), Max: ds[len(ds)-1]}
}
