package broker

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// Sentinel errors, wrapped by the errors of this package that add the
// details; test for them with errors.Is.
var (
	// ErrAuthenticationFailed means Kafka rejected the SASL credentials.
	// It is sarama.ErrSASLAuthenticationFailed, so that it also matches
	// what reaches you through watermill-kafka, such as the error of a
	// subscriber's Subscribe or of a router's Run.
	ErrAuthenticationFailed error = sarama.ErrSASLAuthenticationFailed
	// ErrPublisherClosed is returned by the Publish of a closed
	// [Publisher]. It is an outage (koto.ClassOf): the service is
	// stopping, the message is not at fault.
	ErrPublisherClosed = fmt.Errorf("broker: publisher closed: %w", sarama.ErrShuttingDown)
	// ErrReaderDown is wrapped by the error of [TailReader.Err] while the
	// reader cannot read a partition of its topic; the error also wraps
	// the cause.
	ErrReaderDown = errors.New("broker: tail reader cannot read")
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
