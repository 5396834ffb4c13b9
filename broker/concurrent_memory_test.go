package broker_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// jsonish returns a record value of about size bytes that compresses as
// JSON does: words of a small vocabulary and numbers.
func jsonish(size int) []byte {
	words := strings.Fields("order customer amount currency status shipped pending item sku quantity price total address city country created updated")
	var b bytes.Buffer
	b.WriteByte('{')
	for b.Len() < size-20 {
		fmt.Fprintf(&b, "%q:%d,", words[rand.N(len(words))], rand.N(100000))
	}
	b.WriteString(`"end":true}`)
	return b.Bytes()
}

// gzipRatio is how many times smaller gzip makes values, written one
// after the other as in a batch.
func gzipRatio(t *testing.T, values [][]byte) float64 {
	var raw, out bytes.Buffer
	w := gzip.NewWriter(&out)
	for _, v := range values {
		raw.Write(v)
		if _, err := w.Write(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return float64(raw.Len()) / float64(out.Len())
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestBackPressureBoundsTheHeap publishes 100 000 snappy-compressed records
// of 2 KiB (200 MB decompressed) to 4 partitions, then consumes them with
// Concurrency 8 and handlers blocked on a channel. While they are blocked,
// the live heap grows by less than the bound of Config.PartitionBufferBytes
// for each partition (with sarama's share: a channel of records and one
// fetch, decoded); released, the handlers get every record.
func TestBackPressureBoundsTheHeap(t *testing.T) {
	const partitions, total, size = 4, 100000, 2048
	brokers := kototest.Brokers(t)
	topic := kototest.NewTopic(t, provisionCfg(brokers, partitions), "pressure")
	values := make([][]byte, 64)
	for i := range values {
		values[i] = jsonish(size)
	}
	recs := make([]*kgo.Record, total)
	for i := range recs {
		recs[i] = kototest.Record(topic, watermill.NewUUID(), fmt.Sprint("k", i%1000), values[i%len(values)])
	}
	kototest.Produce(t, brokers, recs, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	ratio := gzipRatio(t, values) // gzip compresses more than snappy: a bound on its ratio
	recs = nil

	cfg := broker.Config{Brokers: brokers, ConsumerGroup: kototest.Group(t, "pressure"), Concurrency: 8, PartitionBufferBytes: 512 << 10}
	bound := heapBound(cfg, partitions, size, ratio)
	base := liveHeap()
	sub := kototest.NewSubscriber(t, cfg)
	release := make(chan struct{})
	var handled, inFlight atomic.Int64
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	msgs := kototest.Subscribe(t, sub, topic)
	for range cfg.Concurrency {
		wg.Go(func() {
			for msg := range msgs {
				inFlight.Add(1)
				<-release
				msg.Ack()
				handled.Add(1)
			}
		})
	}
	kototest.WaitFor(t, "every handler blocked", func() bool { return inFlight.Load() == int64(cfg.Concurrency) })
	var peak uint64
	for range 30 { // three seconds of fetching at whatever speed the machine has
		time.Sleep(100 * time.Millisecond)
		if h := liveHeap(); h > base {
			peak = max(peak, h-base)
		}
	}
	t.Logf("heap grew by at most %.1f MiB while blocked (bound %.1f MiB; gzip ratio %.1f)", mib(peak), mib(bound), ratio)
	if peak > bound {
		t.Errorf("the heap grew by %.1f MiB with every handler blocked, over the bound of %.1f MiB", mib(peak), mib(bound))
	}
	close(release)
	kototest.WaitForCount(t, "records handled", handled.Load, total)
	kototest.WaitCommitted(t, brokers, cfg.ConsumerGroup, topic, total)
}

// heapBound is what a subscriber of cfg may hold of records of size
// bytes compressed ratio times: its buffer of each partition, plus
// sarama's (a channel of a sixteenth of the buffer's records, and one
// fetch of a sixteenth of its bytes, compressed, decoded), plus 8 MiB for
// the clients themselves.
func heapBound(cfg broker.Config, partitions, size int, ratio float64) uint64 {
	records := max(cfg.PartitionBufferRecords, 1000)
	perPartition := float64(cfg.PartitionBufferBytes) + // the subscriber's buffer
		float64(min(records/16, 256)*size) + // sarama's channel
		float64(cfg.PartitionBufferBytes/16)*ratio*2 // a fetch decoded, and the one sent before the pause
	return uint64(float64(partitions)*perPartition) + 8<<20
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }
