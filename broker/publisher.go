package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/koto-dev/watermill-koto/internal/wmlog"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/topics"
)

// Publisher is a Watermill publisher to Kafka with the defaults of
// [Config]: a message.Publisher whose Publish also honours each message's
// context (see the package documentation). Build it with [NewPublisher]
// and Close it when done. It is safe for concurrent use.
type Publisher struct {
	marshaler kafka.Marshaler
	producer  sarama.AsyncProducer
	logger    watermill.LoggerAdapter

	closing   chan struct{} // closed by Close: no message is handed over after it
	closeOnce sync.Once
	mu        sync.RWMutex   // read-held while a message is handed to the producer
	pending   sync.WaitGroup // the messages handed over whose result is not routed yet
	done      chan struct{}  // closed once every result was routed
}

// inFlight is what the producer carries in a record's Metadata: where its
// result goes, and whether the Publish that sent it stopped waiting.
type inFlight struct {
	result    chan error // buffered: the result never waits for a reader
	abandoned atomic.Bool
	uuid      string
}

// NewPublisher returns a Publisher with the defaults of [Config]. It
// connects to the brokers before it returns.
func NewPublisher(cfg Config) (*Publisher, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sc, err := cfg.publisherSarama()
	if err != nil {
		return nil, err
	}
	producer, err := sarama.NewAsyncProducer(cfg.Brokers, sc)
	if err != nil {
		return nil, connectError(cfg, "new Kafka publisher", err)
	}
	p := &Publisher{
		marshaler: cfg.Marshaler,
		producer:  producer,
		logger:    wmlog.Plumbing(cfg.Logger),
		closing:   make(chan struct{}),
		done:      make(chan struct{}),
	}
	go p.route()
	return p, nil
}

// Publish publishes msgs to topic in order and returns once Kafka has
// acknowledged each of them, or with the error of the first one that was
// not; the messages after it are not sent. It stops waiting for a message
// whose context ends first, and returns an error that wraps the context's
// (see the package documentation); a message whose context has already
// ended is not sent. A topic that topics.Validate refuses fails the
// publish before anything is sent, with an error wrapping topics.ErrInvalid.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	if err := topics.Validate(topic); err != nil {
		// Kafka would refuse it too, unless it is lenient, as the embedded
		// broker is, and creates a topic no real cluster accepts.
		return fmt.Errorf("broker: %d message(s) not sent: %w", len(msgs), err)
	}
	for _, msg := range msgs {
		if err := p.publish(topic, msg); err != nil {
			return err
		}
	}
	return nil
}

func (p *Publisher) publish(topic string, msg *message.Message) error {
	ctx := msg.Context()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("broker: message %s to %s not sent: %w", msg.UUID, topic, err)
	}
	rec, err := marshal(p.marshaler, topic, msg)
	if err != nil {
		return fmt.Errorf("broker: cannot marshal message %s: %w", msg.UUID, err)
	}
	f := &inFlight{result: make(chan error, 1), uuid: msg.UUID}
	rec.Metadata = f
	if err := p.handOver(ctx, rec); err != nil {
		return classified(fmt.Errorf("broker: message %s to %s not sent: %w", msg.UUID, topic, err))
	}
	select {
	case err := <-f.result:
		if err != nil {
			return classified(fmt.Errorf("broker: cannot produce message %s to %s: %w", msg.UUID, topic, err))
		}
		return nil
	case <-ctx.Done():
		f.abandoned.Store(true)
		return fmt.Errorf("broker: message %s to %s not acknowledged before its context ended; it may still be written: %w",
			msg.UUID, topic, ctx.Err())
	}
}

// handOver gives rec to the producer, unless ctx ends or the publisher
// closes first.
func (p *Publisher) handOver(ctx context.Context, rec *sarama.ProducerMessage) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	select {
	case <-p.closing:
		return ErrPublisherClosed
	default:
	}
	p.pending.Add(1)
	select {
	case p.producer.Input() <- rec:
		return nil
	case <-ctx.Done():
		p.pending.Done()
		return ctx.Err()
	case <-p.closing:
		p.pending.Done()
		return ErrPublisherClosed
	}
}

// route hands each result of the producer to the Publish that waits for
// it, until the producer has shut down. The result of a message whose
// Publish stopped waiting is logged instead.
func (p *Publisher) route() {
	defer close(p.done)
	successes, errs := p.producer.Successes(), p.producer.Errors()
	for successes != nil || errs != nil {
		select {
		case rec, ok := <-successes:
			if !ok {
				successes = nil
				continue
			}
			p.deliver(rec, nil)
		case perr, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			p.deliver(perr.Msg, perr.Err)
		}
	}
}

func (p *Publisher) deliver(rec *sarama.ProducerMessage, err error) {
	f := rec.Metadata.(*inFlight)
	f.result <- err
	p.pending.Done()
	if !f.abandoned.Load() {
		return
	}
	fields := watermill.LogFields{"message_uuid": f.uuid, "topic": rec.Topic}
	if err != nil {
		p.logger.Error("Message whose publisher stopped waiting was not written", err, fields)
		return
	}
	fields["kafka_partition"], fields["kafka_partition_offset"] = rec.Partition, rec.Offset
	p.logger.Info("Message whose publisher stopped waiting was written after all", fields)
}

// Close stops accepting messages, waits until the producer has flushed
// the ones it has (each acknowledged or failed, within sarama's timeouts and
// retries) and disconnects. Publish afterwards returns ErrPublisherClosed.
// Calling it twice is fine.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		close(p.closing) // ends the hand-overs waiting for the producer
		// The lock is a barrier: it waits for the hand-overs, which hold it
		// to read, so nothing is handed over after AsyncClose.
		p.mu.Lock()
		p.mu.Unlock() //lint:ignore SA2001 a barrier, see above
		// A shutting-down sarama producer fails a batch that it would
		// otherwise retry, so it shuts down once every message has its result.
		p.pending.Wait()
		p.producer.AsyncClose()
	})
	<-p.done
	return nil
}
