package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/koto-dev/watermill-koto/internal/wmlog"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/topics"
)

// ErrSubscriberClosed is returned by the Subscribe of a closed
// [Subscriber].
var ErrSubscriberClosed = errors.New("broker: subscriber closed")

// Subscriber is a Watermill subscriber on a Kafka consumer group, with the
// defaults of [Config]. It decides which messages are in flight at once:
// one per partition, or with Config.Concurrency many, each key in order
// (see the package documentation). Build it with [NewSubscriber] and Close
// it when done. It is safe for concurrent use.
type Subscriber struct {
	cfg    Config
	sarama *sarama.Config
	logger watermill.LoggerAdapter
	work   chan job // with Config.Concurrency above 1: taken by that many workers
	slots  *slots   // with it: which partition may offer work next

	batchSlots chan struct{} // of a batch subscriber: a value for each batch in flight

	life context.Context // ends at Close, and every subscription with it
	stop context.CancelFunc

	mu      sync.Mutex // guards closed and working against wg.Add
	closed  bool
	working bool           // the workers of work run: since the first Subscribe that connected
	wg      sync.WaitGroup // subscriptions and workers

	instanceIDs instanceIDs // with Config.GroupInstanceID: those of the live subscriptions
}

// NewSubscriber returns a Subscriber that consumes in cfg.ConsumerGroup. It
// connects when Subscribe is called.
func NewSubscriber(cfg Config) (*Subscriber, error) {
	cfg.Batch = BatchConfig{}
	return newSubscriber(cfg)
}

func newSubscriber(cfg Config) (*Subscriber, error) {
	cfg.setDefaults()
	if err := cfg.validateSubscriber(); err != nil {
		return nil, err
	}
	sc, err := cfg.subscriberSarama()
	if err != nil {
		return nil, err
	}
	cfg.setDrainTimeout(sc)
	s := &Subscriber{cfg: cfg, sarama: sc, logger: wmlog.Plumbing(cfg.Logger).With(watermill.LogFields{"consumer_group": cfg.ConsumerGroup})}
	s.life, s.stop = context.WithCancel(context.Background())
	switch {
	case cfg.batching():
		s.batchSlots = make(chan struct{}, cfg.Batch.Parallel)
	case cfg.concurrent():
		s.work = make(chan job)
		s.slots = newSlots(cfg.Concurrency)
	}
	return s, nil
}

// Subscribe joins the consumer group on topic and returns the channel of
// its messages, which is closed when ctx ends or the subscriber closes,
// after the messages in flight were drained (Config.DrainTimeout). It
// returns an error when it cannot connect; later outages are retried every
// Config.ReconnectRetrySleep. Messages carry where they were read from in
// their context.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	if err := topics.Validate(topic); err != nil {
		return nil, fmt.Errorf("broker: subscribe in group %q: %w", s.cfg.ConsumerGroup, err)
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	id, err := s.instanceIDs.acquire(s.cfg.GroupInstanceID, topic)
	if err != nil {
		s.wg.Done()
		return nil, err
	}
	conn, err := s.connect(id)
	if err != nil {
		s.instanceIDs.release(id)
		s.wg.Done()
		return nil, err
	}
	s.startWorkersOnce()
	sub := newSubscription(ctx, s, topic)
	sub.instanceID = id
	go sub.run(conn)
	return sub.output, nil
}

// SubscribeInitialize creates topic, if it does not exist, with
// Config.Provision's settings, as [ProvisionTopics] does; Watermill calls
// it before Subscribe when asked to (message.SubscribeInitializer).
func (s *Subscriber) SubscribeInitialize(topic string) error {
	ctx, cancel := context.WithTimeout(s.life, provisionTimeout)
	defer cancel()
	return ProvisionTopics(ctx, s.cfg, topic)
}

// Close ends every subscription, each after draining its messages in
// flight (Config.DrainTimeout) and committing what was acked, and returns
// once all have ended. It is safe to call more than once.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	return nil
}

// enter counts a subscription in, unless the subscriber is closed.
func (s *Subscriber) enter() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrSubscriberClosed
	}
	s.wg.Add(1)
	return nil
}

// groupConn is one connection of a subscription to its consumer group.
type groupConn struct {
	client sarama.Client
	group  sarama.ConsumerGroup
}

// connect joins the group as a member with the group instance ID id, or
// as a dynamic member when id is empty.
func (s *Subscriber) connect(id string) (*groupConn, error) {
	client, err := sarama.NewClient(s.cfg.Brokers, s.memberSarama(id))
	if err != nil {
		return nil, connectError(s.cfg, fmt.Sprintf("subscribe in group %q", s.cfg.ConsumerGroup), err)
	}
	group, err := sarama.NewConsumerGroupFromClient(s.cfg.ConsumerGroup, client)
	if err != nil {
		_ = client.Close()
		return nil, connectError(s.cfg, fmt.Sprintf("join group %q", s.cfg.ConsumerGroup), err)
	}
	return &groupConn{client: client, group: group}, nil
}

func (c *groupConn) close() error {
	return errors.Join(c.group.Close(), c.client.Close())
}
