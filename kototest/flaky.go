package kototest

import (
	"cmp"
	"fmt"
	"sync"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
)

// ErrPublishDown is what a [FlakyPublisher]'s failing calls return by
// default: it wraps the error sarama returns when no broker can be reached,
// marked koto.Outage as broker.Publisher marks it.
var ErrPublishDown = koto.Outage(fmt.Errorf("kototest: injected: %w", sarama.ErrOutOfBrokers))

// FlakyPublisher is a real publisher whose calls to Publish fail, without
// publishing, while fewer than the number set by FailFor or FailWith of
// them have failed. It is safe for concurrent use.
type FlakyPublisher struct {
	message.Publisher
	mu       sync.Mutex
	failures int
	failed   int
	err      error // what a failing call returns; nil: ErrPublishDown
}

// Publish fails or calls the real publisher.
func (p *FlakyPublisher) Publish(topic string, msgs ...*message.Message) error {
	p.mu.Lock()
	fail := p.failed < p.failures
	if fail {
		p.failed++
	}
	err := cmp.Or(p.err, ErrPublishDown)
	p.mu.Unlock()
	if fail {
		return fmt.Errorf("publishing to %s: %w", topic, err)
	}
	return p.Publisher.Publish(topic, msgs...)
}

// FailFor makes the next n calls fail with [ErrPublishDown].
func (p *FlakyPublisher) FailFor(n int) { p.FailWith(n, nil) }

// FailWith makes the next n calls fail with err (nil: [ErrPublishDown]).
func (p *FlakyPublisher) FailWith(n int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures, p.failed, p.err = n, 0, err
}

// Failed returns how many calls failed since the last FailFor or
// FailWith.
func (p *FlakyPublisher) Failed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}
