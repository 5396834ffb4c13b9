package broker

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// Sentinel errors, wrapped by the errors of this package that add the
// details; test for them with errors.Is.
var (
	// ErrNoBrokers means Config.Brokers is empty.
	ErrNoBrokers = errors.New("broker: no Kafka brokers configured")
	// ErrNoConsumerGroup means NewSubscriber got an empty Config.ConsumerGroup.
	ErrNoConsumerGroup = errors.New("broker: no consumer group configured")
	// ErrInvalidConfig means another configuration field has a value this
	// package cannot use; the message names the field.
	ErrInvalidConfig = errors.New("broker: invalid configuration")
	// ErrAuthenticationFailed means Kafka rejected the SASL credentials.
	// It is sarama.ErrSASLAuthenticationFailed, so that it also matches
	// what reaches you through watermill-kafka, such as the error of a
	// subscriber's Subscribe or of a router's Run.
	ErrAuthenticationFailed error = sarama.ErrSASLAuthenticationFailed
)

// connectError is the error of a client that could not connect for what it
// was doing; it says so plainly when the credentials were refused.
func connectError(cfg Config, doing string, err error) error {
	if errors.Is(err, ErrAuthenticationFailed) {
		who := "the credentials set in Config.Sarama"
		if cfg.SASL.User != "" {
			who = fmt.Sprintf("%s user %q", cfg.SASL.Mechanism, cfg.SASL.User)
		}
		return fmt.Errorf("broker: %s: Kafka at %v rejected %s; check Config.SASL: %w", doing, cfg.Brokers, who, err)
	}
	return fmt.Errorf("broker: %s on %v: %w", doing, cfg.Brokers, err)
}
