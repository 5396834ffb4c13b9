package reliability

import (
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/topics"
)

// volumePartitions is the partitions of the volume topic: the router
// handles one message per partition at a time, so they are its concurrency.
const volumePartitions = 16

// volumeLimit bounds the consumption of one store's stream.
const volumeLimit = 8 * time.Minute

// TestVolume publishes 100 000 distinct messages (by default: 10 000) and a
// re-publication with the same UUID of every fifth one, then consumes the
// topic through a Watermill router behind middleware.Defaults, in one
// consumer group with the memory store and in another with the PostgreSQL
// store, and checks that each ledger holds exactly one effect per distinct
// message. The rate covers consumption only, the stream being on the broker
// before the router starts.
func TestVolume(t *testing.T) {
	n := fullOrShort(100_000, 10_000)
	b := kototest.Embedded(t)
	base := broker.Config{Brokers: b.Addrs(), Provision: broker.ProvisionConfig{Partitions: volumePartitions}}
	pub := kototest.NewPublisher(t, base)
	topic := kototest.NewTopic(t, base, "volume")
	sent := keyedMessages("volume", n)
	stream := withRepublished(sent)
	began := time.Now()
	fillTopic(t, base.Brokers, topic, stream)
	t.Logf("wrote %d messages in %v", len(stream), time.Since(began).Round(time.Millisecond))

	stores := []struct {
		name  string
		store func(t *testing.T) idempotency.Store
	}{
		{"memory", func(t *testing.T) idempotency.Store {
			s := idempotency.NewMemoryStore(0)
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"postgres", func(t *testing.T) idempotency.Store {
			cfg := pgtest.Config(t)
			cfg.MaxConns = volumePartitions + 4
			pool := pgtest.PoolWith(t, cfg)
			s, err := postgres.NewStore(pool, postgres.Config{Schema: pgtest.Schema(t, pool), CleanupInterval: -1})
			if err != nil {
				t.Fatalf("postgres.NewStore: %v", err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			store := s.store(t)
			var effects effectLedger
			cfg := base
			cfg.ConsumerGroup = kototest.Group(t, "volume-"+s.name)
			c := startRouted(t, pub, routedSpec{cfg: cfg, topic: topic, store: store, effect: effects.add})
			took := c.waitDone(t, int64(len(stream)), volumeLimit, fmt.Sprintf("%s store", s.name))
			kototest.WaitCommitted(t, cfg.Brokers, cfg.ConsumerGroup, topic, int64(len(stream)))
			c.stop()

			dups, losses := effects.tally(sent)
			record(t, row{
				Checks:     "effects = distinct messages (" + s.name + " store, check-handle-mark)",
				Faults:     "20 % re-published duplicates",
				Messages:   n,
				Duplicates: dups,
				Losses:     losses,
				Note:       fmt.Sprintf("%s (%d deliveries in %.1fs, %d partitions)", msgRate(len(stream), took), len(stream), took.Seconds(), volumePartitions),
			})
			if dups != 0 || losses != 0 || effects.Total() != n {
				t.Fatalf("%s store: %d effects for %d distinct messages: %d duplicate effects, %d messages lost", s.name, effects.Total(), n, dups, losses)
			}
			if n := kototest.Records(t, cfg.Brokers, topics.DeadLetter(cfg.ConsumerGroup)); n != 0 {
				t.Errorf("%s store: %d dead letters, want none", s.name, n)
			}
		})
	}
}

// fillTopic writes msgs to topic as the project's publisher would (its
// marshaler, and its default partitioner, librdkafka's, so that a duplicate
// lands on its original's partition), through a franz-go client: the
// publisher under -race would take longer to write the stream than the
// consumers take to read it, and the write is not what this test measures.
func fillTopic(t testing.TB, brokers []string, topic string, msgs []*message.Message) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(crc32Hasher)))
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	defer cl.Close()
	marshaler := broker.NewPartitionKeyMarshaler()
	const batch = 10_000
	for start := 0; start < len(msgs); start += batch {
		recs := make([]*kgo.Record, 0, batch)
		for _, m := range msgs[start:min(start+batch, len(msgs))] {
			pm, err := marshaler.Marshal(topic, m)
			if err != nil {
				t.Fatalf("marshal %s: %v", m.UUID, err)
			}
			rec := &kgo.Record{Key: saramaBytes(t, pm.Key), Value: saramaBytes(t, pm.Value)}
			for _, h := range pm.Headers {
				rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: string(h.Key), Value: h.Value})
			}
			recs = append(recs, rec)
		}
		if err := cl.ProduceSync(kototest.Context(t), recs...).FirstErr(); err != nil {
			t.Fatalf("write messages %d.. to %s: %v", start, topic, err)
		}
	}
}

// saramaBytes returns the bytes of a sarama encoder; nil for nil.
func saramaBytes(t testing.TB, e sarama.Encoder) []byte {
	t.Helper()
	if e == nil {
		return nil
	}
	b, err := e.Encode()
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return b
}

// crc32Hasher is librdkafka's consistent_random for records with a key,
// broker.PartitionByCRC32.
func crc32Hasher(key []byte, partitions int) int {
	return int(crc32.ChecksumIEEE(key) % uint32(partitions))
}
