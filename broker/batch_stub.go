package broker

import "time"

// BatchConfig is replaced by the batch subscriber's.
type BatchConfig struct {
	MaxMessages int
	MaxBytes    int
	MaxWait     time.Duration
	Parallel    int
}

// WithDefaults returns c with its defaults.
func (c BatchConfig) WithDefaults() BatchConfig {
	if c.MaxMessages == 0 {
		c.MaxMessages = 500
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = 4 << 20
	}
	if c.MaxWait == 0 {
		c.MaxWait = 50 * time.Millisecond
	}
	if c.Parallel == 0 {
		c.Parallel = 2
	}
	return c
}

// NewBatchSubscriber is replaced by the batch subscriber's.
func NewBatchSubscriber(cfg Config) (*Subscriber, error) { return NewSubscriber(cfg) }
