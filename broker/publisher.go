package broker

import (
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
)

// NewPublisher returns a watermill-kafka publisher with the defaults of
// [Config]. It connects to the brokers before it returns. A nil logger logs
// nothing. Close the publisher when done.
func NewPublisher(cfg Config, logger watermill.LoggerAdapter) (*kafka.Publisher, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sc, err := cfg.publisherSarama()
	if err != nil {
		return nil, err
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{
		Brokers:               cfg.Brokers,
		Marshaler:             cfg.Marshaler,
		OverwriteSaramaConfig: sc,
	}, orNop(logger))
	if err != nil {
		return nil, connectError(cfg, "new Kafka publisher", err)
	}
	return pub, nil
}

func orNop(logger watermill.LoggerAdapter) watermill.LoggerAdapter {
	if logger == nil {
		return watermill.NopLogger{}
	}
	return logger
}
