package broker

import (
	"time"

	"github.com/koto-dev/watermill-koto/internal/config"
)

// BatchConfig says how a batch subscriber ([NewBatchSubscriber]) fills its
// batches: a batch is handed out once it holds MaxMessages messages or
// MaxBytes bytes, or MaxWait after it began filling, whichever comes
// first. The zero value means the defaults.
type BatchConfig struct {
	// MaxMessages is the most messages in a batch. Default: 500.
	MaxMessages int
	// MaxBytes is the most bytes (keys, values and headers) in a batch; a
	// single larger message is a batch of its own. Default: 1 MiB.
	MaxBytes int
	// MaxWait is how long a batch fills at most before it is handed out.
	// Default: 50ms.
	MaxWait time.Duration
	// Parallel is how many batches the subscriber has in flight at once,
	// over all its partitions. Default: 2.
	Parallel int
}

// Defaults of [BatchConfig].
const (
	defaultBatchMessages = 500
	defaultBatchBytes    = 1 << 20
	defaultBatchWait     = 50 * time.Millisecond
	defaultBatchParallel = 2
)

// WithDefaults returns c with every zero field set to its default.
func (c BatchConfig) WithDefaults() BatchConfig {
	if c.MaxMessages == 0 {
		c.MaxMessages = defaultBatchMessages
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = defaultBatchBytes
	}
	if c.MaxWait == 0 {
		c.MaxWait = defaultBatchWait
	}
	if c.Parallel == 0 {
		c.Parallel = defaultBatchParallel
	}
	return c
}

// NewBatchSubscriber returns a Subscriber that consumes in
// cfg.ConsumerGroup and hands out batches, as cfg.Batch says (see Batches
// in the package documentation). Config.Concurrency and Config.Ordering
// do not apply to it. It connects when Subscribe is called.
func NewBatchSubscriber(cfg Config) (*Subscriber, error) {
	cfg.Batch = cfg.Batch.WithDefaults()
	cfg.setBatchBuffers()
	cfg.Concurrency, cfg.Ordering = 0, OrderByKey
	return newSubscriber(cfg)
}

// batching reports whether c is the configuration of a batch subscriber:
// NewSubscriber clears Batch, NewBatchSubscriber sets its defaults.
func (c Config) batching() bool { return c.Batch.Parallel != 0 }

// acksOutOfOrder reports whether a partition's messages may be acked out
// of offset order, so that its commits list the offsets acked above the
// committed one for the next owner to skip.
func (c Config) acksOutOfOrder() bool { return c.concurrent() || c.batching() }

// setBatchBuffers sizes the buffer of a partition, where not set, to hold
// a full batch of the partition in each slot and the next one filling.
func (c *Config) setBatchBuffers() {
	n := c.Batch.Parallel + 1
	if c.PartitionBufferRecords == 0 {
		c.PartitionBufferRecords = max(defaultPartitionBufferRecords, n*c.Batch.MaxMessages)
	}
	if c.PartitionBufferBytes == 0 {
		c.PartitionBufferBytes = max(defaultPartitionBufferBytes, n*c.Batch.MaxBytes)
	}
}

// validateBatch checks Config.Batch, with the defaults set, against the
// buffer of a partition.
func (c Config) validateBatch(p *config.Problems) {
	b := c.Batch
	if b.MaxMessages < 0 {
		p.Add("Batch.MaxMessages", "is %d; use a positive count, or 0 for the default (%d)", b.MaxMessages, defaultBatchMessages)
	}
	if b.MaxBytes < 0 {
		p.Add("Batch.MaxBytes", "is %d; use a positive size, or 0 for the default (%d)", b.MaxBytes, defaultBatchBytes)
	}
	if b.MaxWait < 0 {
		p.Add("Batch.MaxWait", "is %v; use a positive duration, or 0 for the default (%v)", b.MaxWait, defaultBatchWait)
	}
	if b.Parallel < 0 {
		p.Add("Batch.Parallel", "is %d; use a positive count, or 0 for the default (%d)", b.Parallel, defaultBatchParallel)
	}
	if b.MaxMessages > 0 && c.PartitionBufferRecords > 0 && c.PartitionBufferRecords < b.MaxMessages {
		p.Add("PartitionBufferRecords", "is %d, below Batch.MaxMessages (%d): no batch could fill; raise it, leave it 0, or lower Batch.MaxMessages",
			c.PartitionBufferRecords, b.MaxMessages)
	}
	if b.MaxBytes > 0 && c.PartitionBufferBytes > 0 && c.PartitionBufferBytes < b.MaxBytes {
		p.Add("PartitionBufferBytes", "is %d, below Batch.MaxBytes (%d): no batch could fill; raise it, leave it 0, or lower Batch.MaxBytes",
			c.PartitionBufferBytes, b.MaxBytes)
	}
}
