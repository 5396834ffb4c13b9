package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/koto-dev/watermill-koto/internal/wmlog"

	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
)

// Subscriber is a Watermill subscriber of a Kafka consumer group with the
// defaults of [Config]. Every message's context carries its koto.Position.
// Build it with [NewSubscriber] and Close it when done.
type Subscriber struct {
	cfg     Config
	inner   *kafka.Subscriber
	closing chan struct{}
	once    sync.Once
	subs    sync.WaitGroup // the goroutines of Subscribe
}

// NewSubscriber returns a Subscriber that consumes in cfg.ConsumerGroup.
// It connects when Subscribe is called.
func NewSubscriber(cfg Config) (*Subscriber, error) {
	cfg.setDefaults()
	if err := cfg.validateSubscriber(); err != nil {
		return nil, err
	}
	sc, err := cfg.subscriberSarama()
	if err != nil {
		return nil, err
	}
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{
		Brokers:               cfg.Brokers,
		Unmarshaler:           cfg.Marshaler,
		OverwriteSaramaConfig: sc,
		ConsumerGroup:         cfg.ConsumerGroup,
		NackResendSleep:       noSleepIfNegative(cfg.NackResendSleep),
		ReconnectRetrySleep:   noSleepIfNegative(cfg.ReconnectRetrySleep),
	}, wmlog.Plumbing(cfg.Logger))
	if err != nil {
		return nil, fmt.Errorf("broker: new Kafka subscriber in group %q: %w", cfg.ConsumerGroup, err)
	}
	return &Subscriber{cfg: cfg, inner: sub, closing: make(chan struct{})}, nil
}

// Subscribe consumes topic until ctx ends or the subscriber closes; the
// channel closes then.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	in, err := s.inner.Subscribe(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make(chan *message.Message)
	s.subs.Add(1)
	go func() {
		defer s.subs.Done()
		defer close(out)
		for msg := range in {
			msg.SetContext(koto.ContextWithPosition(msg.Context(), positionOf(msg.Context(), topic)))
			select {
			case out <- msg:
			case <-ctx.Done():
				return
			case <-s.closing:
				return
			}
		}
	}()
	return out, nil
}

// SubscribeInitialize creates topic, if it does not exist, with
// Config.Provision's settings, as [ProvisionTopics] does; Watermill calls
// it before Subscribe when asked to (message.SubscribeInitializer).
func (s *Subscriber) SubscribeInitialize(topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), provisionTimeout)
	defer cancel()
	return ProvisionTopics(ctx, s.cfg, topic)
}

// Close stops every subscription and waits for them to end.
func (s *Subscriber) Close() error {
	s.once.Do(func() { close(s.closing) })
	err := s.inner.Close()
	s.subs.Wait() // every channel is closed when Close returns
	return err
}

func positionOf(ctx context.Context, topic string) koto.Position {
	p := koto.Position{Topic: topic}
	p.Partition, _ = kafka.MessagePartitionFromCtx(ctx)
	p.Offset, _ = kafka.MessagePartitionOffsetFromCtx(ctx)
	p.Key, _ = kafka.MessageKeyFromCtx(ctx)
	p.Timestamp, _ = kafka.MessageTimestampFromCtx(ctx)
	return p
}

// noSleepIfNegative maps any negative duration to watermill-kafka's NoSleep
// (-1ns), which is the only negative value it understands.
func noSleepIfNegative(d time.Duration) time.Duration {
	if d < 0 {
		return kafka.NoSleep
	}
	return d
}
