package broker

import (
	"errors"
	"fmt"
	"testing"

	"github.com/IBM/sarama"

	koto "github.com/koto-dev/watermill-koto"
)

// TestClassifiedKafka: Kafka errors that say the cluster is unavailable for
// now are outages, also inside sarama's producer errors; errors of the
// request itself stay retryable.
func TestClassifiedKafka(t *testing.T) {
	produced := func(err error) *sarama.ProducerError {
		return &sarama.ProducerError{Msg: &sarama.ProducerMessage{Topic: "orders"}, Err: err}
	}
	outages := []error{
		sarama.ErrOutOfBrokers, sarama.ErrNotConnected, sarama.ErrClosedClient, sarama.ErrShuttingDown,
		sarama.ErrControllerNotAvailable, sarama.ErrLeaderNotAvailable, sarama.ErrNotLeaderForPartition,
		sarama.ErrRequestTimedOut, sarama.ErrBrokerNotAvailable, sarama.ErrReplicaNotAvailable,
		sarama.ErrNetworkException, sarama.ErrNotEnoughReplicas, sarama.ErrNotEnoughReplicasAfterAppend,
		sarama.ErrNotController, sarama.ErrKafkaStorageError, sarama.ErrThrottlingQuotaExceeded,
		sarama.Wrap(sarama.ErrOutOfBrokers, errors.New("dial tcp: refused")),
		fmt.Errorf("publish: %w", produced(sarama.ErrNotEnoughReplicas)),
		sarama.ProducerErrors{produced(sarama.ErrLeaderNotAvailable), produced(sarama.ErrRequestTimedOut)},
	}
	for _, err := range outages {
		if got := koto.ClassOf(fmt.Errorf("handler: %w", classified(err))); got != koto.ClassOutage {
			t.Errorf("ClassOf(classified(%v)) = %v, want outage", err, got)
		}
	}
	retryable := []error{
		sarama.ErrMessageSizeTooLarge, sarama.ErrUnknownTopicOrPartition, sarama.ErrInvalidMessage,
		sarama.ErrTopicAuthorizationFailed, produced(sarama.ErrInvalidPartition),
		sarama.ProducerErrors{produced(sarama.ErrLeaderNotAvailable), produced(sarama.ErrMessageSizeTooLarge)},
	}
	for _, err := range retryable {
		if got := koto.ClassOf(classified(err)); got != koto.ClassRetryable {
			t.Errorf("ClassOf(classified(%v)) = %v, want retryable", err, got)
		}
	}
}

// TestClassifiedProducerStateErrors: the Kafka errors of an idempotent
// producer whose state the broker lost are outages, however they arrive:
// a retry clears them, and the message is not at fault.
func TestClassifiedProducerStateErrors(t *testing.T) {
	for _, code := range []sarama.KError{
		sarama.ErrOutOfOrderSequenceNumber,
		sarama.ErrInvalidProducerEpoch,
		sarama.ErrInvalidProducerIDMapping,
		sarama.ErrUnknownProducerID,
	} {
		for _, err := range []error{
			code,
			fmt.Errorf("publishing the reply: %w", code),
			&sarama.ProducerError{Err: code},
			sarama.ProducerErrors{{Err: code}},
		} {
			if got := koto.ClassOf(classified(err)); got != koto.ClassOutage {
				t.Errorf("ClassOf(classified(%v)) = %s, want outage", err, got)
			}
		}
	}
	if got := koto.ClassOf(classified(sarama.ErrProducerFenced)); got == koto.ClassOutage {
		t.Errorf("ClassOf(classified(PRODUCER_FENCED)) = outage; a fenced transactional producer does not recover by retrying")
	}
}

// TestClassifiedTooLarge: a record too large for the broker or for the
// producer's own limit wraps ErrMessageTooLarge and stays retryable, and
// the Kafka error is still in the chain.
func TestClassifiedTooLarge(t *testing.T) {
	for _, err := range []error{
		sarama.ErrMessageSizeTooLarge,
		fmt.Errorf("produce: %w", &sarama.ProducerError{Err: sarama.ErrMessageSizeTooLarge}),
		sarama.ConfigurationError("Attempt to produce message larger than configured Producer.MaxMessageBytes: 2000000 > 1000000"),
	} {
		got := classified(err)
		if !errors.Is(got, koto.ErrMessageTooLarge) || !errors.Is(got, err) {
			t.Errorf("classified(%v) = %v, want it to wrap ErrMessageTooLarge and the error", err, got)
		}
		if c := koto.ClassOf(got); c != koto.ClassRetryable {
			t.Errorf("ClassOf(classified(%v)) = %v, want retryable", err, c)
		}
	}
	if classified(nil) != nil {
		t.Error("classified(nil) is not nil")
	}
	plain := errors.New("plain")
	if got := classified(plain); got != plain {
		t.Errorf("classified(plain) = %v, want it unchanged", got)
	}
}
