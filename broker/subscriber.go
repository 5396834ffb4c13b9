package broker

import (
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
)

// NewSubscriber returns a watermill-kafka subscriber that consumes in
// cfg.ConsumerGroup with the defaults of [Config]. It connects when
// Subscribe is called. A nil logger logs nothing. Close the subscriber when
// done.
func NewSubscriber(cfg Config, logger watermill.LoggerAdapter) (*kafka.Subscriber, error) {
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
	}, orNop(logger))
	if err != nil {
		return nil, fmt.Errorf("broker: new Kafka subscriber in group %q: %w", cfg.ConsumerGroup, err)
	}
	return sub, nil
}

// noSleepIfNegative maps any negative duration to watermill-kafka's NoSleep
// (-1ns), which is the only negative value it understands.
func noSleepIfNegative(d time.Duration) time.Duration {
	if d < 0 {
		return kafka.NoSleep
	}
	return d
}
