package broker

import (
	"fmt"
	"time"

	"github.com/koto-dev/watermill-koto/internal/config"

	"github.com/IBM/sarama"
)

// Ordering says which messages of a partition wait for each other in a
// subscriber whose Config.Concurrency is above 1.
type Ordering int

const (
	// OrderByKey hands out at most one message per Kafka record key at a
	// time; messages without a key wait for each other, as one key.
	OrderByKey Ordering = iota
	// Unordered lets any message of a partition be in flight with any
	// other, for handlers that do not depend on order.
	Unordered
)

// String returns the constant's name.
func (o Ordering) String() string {
	switch o {
	case OrderByKey:
		return "OrderByKey"
	case Unordered:
		return "Unordered"
	}
	return fmt.Sprintf("Ordering(%d)", int(o))
}

// Defaults of the consumption settings of [Config].
const (
	defaultPartitionBufferRecords = 1000
	defaultPartitionBufferBytes   = 1 << 20
	defaultDrainTimeout           = 10 * time.Second
	maxConcurrency                = 1 << 16
)

func (c *Config) setConsumeDefaults() {
	if c.PartitionBufferRecords == 0 {
		c.PartitionBufferRecords = defaultPartitionBufferRecords
	}
	if c.PartitionBufferBytes == 0 {
		c.PartitionBufferBytes = defaultPartitionBufferBytes
	}
}

// setDrainTimeout defaults Config.DrainTimeout to fit in the rebalance
// timeout of sc; Validate refuses a DrainTimeout set that does not.
func (c *Config) setDrainTimeout(sc *sarama.Config) {
	if c.DrainTimeout == 0 {
		c.DrainTimeout = min(defaultDrainTimeout, sc.Consumer.Group.Rebalance.Timeout/2)
	}
}

// rebalanceTimeout is the Consumer.Group.Rebalance.Timeout a subscriber of
// c runs with: sarama's default, or what Config.Sarama sets.
func (c Config) rebalanceTimeout() time.Duration {
	c.setDefaults()
	sc := c.subscriberBase()
	c.applySarama(sc)
	return sc.Consumer.Group.Rebalance.Timeout
}

// concurrent reports whether the subscriber hands out more than one
// message of a partition at a time.
func (c Config) concurrent() bool { return c.Concurrency > 1 }

// validateConsume checks the consumption settings, all of them.
func (c Config) validateConsume(p *config.Problems) {
	if c.Concurrency < 0 || c.Concurrency > maxConcurrency {
		p.Add("Concurrency", "is %d; use 0 or 1 for one message per partition at a time, or up to %d", c.Concurrency, maxConcurrency)
	}
	switch {
	case c.Ordering < OrderByKey || c.Ordering > Unordered:
		p.Add("Ordering", "is %v; use OrderByKey or Unordered", c.Ordering)
	case c.Ordering != OrderByKey && !c.concurrent():
		p.Add("Ordering", "is %v but Concurrency is %d; set Concurrency above 1, or leave Ordering unset", c.Ordering, c.Concurrency)
	}
	if c.PartitionBufferRecords < 0 {
		p.Add("PartitionBufferRecords", "is %d; use a positive count, or 0 for the default (%d)", c.PartitionBufferRecords, defaultPartitionBufferRecords)
	}
	if c.PartitionBufferBytes < 0 {
		p.Add("PartitionBufferBytes", "is %d; use a positive size, or 0 for the default (%d)", c.PartitionBufferBytes, defaultPartitionBufferBytes)
	}
	c.validateDrainTimeout(p)
}

// validateDrainTimeout checks that a drain ends before the rebalance
// timeout: a member whose revoked partition is still draining then is
// dropped from the group. The default always fits, so Config.Sarama is
// only called for a DrainTimeout that is set.
func (c Config) validateDrainTimeout(p *config.Problems) {
	switch {
	case c.DrainTimeout < 0:
		p.Add("DrainTimeout", "is %v; use a positive duration, or 0 for the default (%v)", c.DrainTimeout, defaultDrainTimeout)
	case c.DrainTimeout > 0:
		if rebalance := c.rebalanceTimeout(); c.DrainTimeout >= rebalance {
			p.Add("DrainTimeout", "is %v, not shorter than sarama's Consumer.Group.Rebalance.Timeout (%v): the group would drop the member mid-drain; lower DrainTimeout below %v, or raise Consumer.Group.Rebalance.Timeout above %v in Config.Sarama",
				c.DrainTimeout, rebalance, rebalance, c.DrainTimeout)
		}
	}
}

// boundFetch keeps what sarama holds of a partition, besides the
// subscriber's own buffer, small against that buffer: its channel of
// decoded records, and one fetch, which Kafka sizes by its compressed
// bytes (a batch larger than the fetch size still comes whole).
func (c Config) boundFetch(sc *sarama.Config) {
	sc.ChannelBufferSize = min(max(c.PartitionBufferRecords/fetchShare, 16), 256)
	sc.Consumer.Fetch.Default = int32(min(max(c.PartitionBufferBytes/fetchShare, 16<<10), 1<<20))
}

// fetchShare is how much smaller than the subscriber's buffer of a
// partition sarama's channel and fetch size are.
const fetchShare = 16
