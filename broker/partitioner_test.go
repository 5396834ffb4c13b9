package broker_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// partitionedKeys and partitionedPartitions size the partitioner tests: as
// many keys as it takes for every partition to get some.
const (
	partitionedKeys       = 300
	partitionedPartitions = 12
)

// TestPartitionersMatchTheirClients produces 300 random keys to a
// 12-partition topic with each Partitioner, through the publisher and the
// producer of this package, and with the client whose partitioner it is:
// kcat on librdkafka's default for the default setting, franz-go's default
// for PartitionByMurmur2, a sarama producer on its defaults for
// PartitionByFNV1a. Every key lands on the same partition from both.
func TestPartitionersMatchTheirClients(t *testing.T) {
	tests := []struct {
		name        string
		partitioner broker.Partitioner
		reference   func(t *testing.T, brokers []string, topic string, keys []string)
	}{
		{"default is librdkafka's consistent_random", 0, produceWithKcat},
		{"murmur2 is franz-go's default", broker.PartitionByMurmur2, produceWithFranzGo},
		{"FNV-1a is sarama's default", broker.PartitionByFNV1a, produceWithSarama},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			brokers := kototest.Brokers(t)
			pcfg := provisionCfg(brokers, partitionedPartitions)
			keys := randomKeys(t, partitionedKeys)
			refTopic := kototest.NewTopic(t, pcfg, "reference")
			tt.reference(t, brokers, refTopic, keys)
			want := keyPartitions(t, brokers, refTopic, len(keys))
			if n := distinct(want); n != partitionedPartitions {
				t.Fatalf("the reference client used %d of the %d partitions; the keys do not tell partitioners apart", n, partitionedPartitions)
			}

			cfg := broker.Config{Brokers: brokers, Partitioner: tt.partitioner}
			pubTopic, prodTopic := kototest.NewTopic(t, pcfg, "publisher"), kototest.NewTopic(t, pcfg, "producer")
			publishKeys(t, kototest.NewPublisher(t, cfg), pubTopic, keys)
			produceKeys(t, cfg, prodTopic, keys)
			for client, topic := range map[string]string{"NewPublisher": pubTopic, "NewProducer": prodTopic} {
				got := keyPartitions(t, brokers, topic, len(keys))
				if diff := differing(want, got); len(diff) > 0 {
					t.Errorf("%s with %v: %d of %d keys on another partition than the reference client's, e.g. %s",
						client, tt.partitioner, len(diff), len(keys), diff[0])
				}
			}
		})
	}
}

// randomKeys returns n distinct keys of 1 to 40 characters, ASCII and
// beyond, none with a colon or a line break (kcat's delimiters).
func randomKeys(t *testing.T, n int) []string {
	seed := rand.Uint64()
	t.Logf("keys from seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, seed))
	alphabet := []rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./ #@äöüßéçøΩжこん")
	seen := make(map[string]bool, n)
	keys := make([]string, 0, n)
	for len(keys) < n {
		k := make([]rune, 1+rnd.IntN(40))
		for i := range k {
			k[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		if s := string(k); !seen[s] {
			seen[s] = true
			keys = append(keys, s)
		}
	}
	return keys
}

// produceWithKcat produces one record per key with kcat, librdkafka's
// default partitioner choosing the partitions.
func produceWithKcat(t *testing.T, brokers []string, topic string, keys []string) {
	kcat := kototest.Kcat(t)
	var in strings.Builder
	for i, k := range keys {
		fmt.Fprintf(&in, "%s:%d\n", k, i)
	}
	cmd := exec.CommandContext(kototest.Context(t), kcat, "-b", brokers[0], "-P", "-K", ":", "-t", topic)
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stderr = strings.NewReader(in.String()), &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat -P: %v\nstderr: %s", err, stderr.String())
	}
}

// produceWithFranzGo produces one record per key with franz-go's default
// partitioner.
func produceWithFranzGo(t *testing.T, brokers []string, topic string, keys []string) {
	recs := make([]*kgo.Record, len(keys))
	for i, k := range keys {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(fmt.Sprint(i))}
	}
	kototest.Produce(t, brokers, recs)
}

// produceWithSarama produces one record per key with a sarama producer on
// sarama's defaults.
func produceWithSarama(t *testing.T, brokers []string, topic string, keys []string) {
	sc := sarama.NewConfig()
	sc.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(brokers, sc)
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	defer p.Close()
	recs := make([]*sarama.ProducerMessage, len(keys))
	for i, k := range keys {
		recs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(k), Value: sarama.StringEncoder(fmt.Sprint(i))}
	}
	if err := p.SendMessages(recs); err != nil {
		t.Fatalf("sarama SendMessages: %v", err)
	}
}

// publishKeys publishes one message per key, the key as its partition key.
func publishKeys(t *testing.T, pub message.Publisher, topic string, keys []string) {
	msgs := make([]*message.Message, len(keys))
	for i, k := range keys {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprint(i)))
		msgs[i].Metadata.Set(koto.PartitionKeyMetadataKey, k)
	}
	if err := pub.Publish(topic, msgs...); err != nil {
		t.Fatalf("Publish: %v", err)
	}
}

// produceKeys sends one message per key with NewProducer, as the outbox
// forwarder and the dead-letter replay do.
func produceKeys(t *testing.T, cfg broker.Config, topic string, keys []string) {
	p, err := broker.NewProducer(cfg)
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	defer p.Close()
	recs := make([]*sarama.ProducerMessage, len(keys))
	for i, k := range keys {
		msg := message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprint(i)))
		msg.Metadata.Set(koto.PartitionKeyMetadataKey, k)
		if recs[i], err = p.Marshaler.Marshal(topic, msg); err != nil {
			t.Fatalf("Marshal: %v", err)
		}
	}
	if err := p.SendMessages(recs); err != nil {
		t.Fatalf("SendMessages: %v", err)
	}
}

// keyPartitions reads n records of topic and returns the partition of each
// key.
func keyPartitions(t *testing.T, brokers []string, topic string, n int) map[string]int32 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	defer cl.Close()
	ctx := kototest.Context(t)
	got := make(map[string]int32, n)
	for len(got) < n {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of the %d records of %s: %v", len(got), n, topic, err)
		}
		fetches.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch %s: %v", topic, err) })
		fetches.EachRecord(func(r *kgo.Record) { got[string(r.Key)] = r.Partition })
	}
	return got
}

// distinct returns how many partitions the keys of m are on.
func distinct(m map[string]int32) int {
	set := map[int32]bool{}
	for _, p := range m {
		set[p] = true
	}
	return len(set)
}

// differing lists the keys that are not on the same partition in want and
// got.
func differing(want, got map[string]int32) []string {
	var diff []string
	for k, p := range want {
		if q, ok := got[k]; !ok || q != p {
			diff = append(diff, fmt.Sprintf("%q on %d, not %d", k, q, p))
		}
	}
	return diff
}
