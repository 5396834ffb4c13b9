package middleware_test

import (
	"fmt"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
)

// TestClassifyProducerStateErrors: the Kafka errors of an idempotent
// producer whose state the broker lost are outages, however they arrive:
// a retry clears them, and the message is not at fault.
func TestClassifyProducerStateErrors(t *testing.T) {
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
			if got := koto.ClassOf(err); got != koto.ClassOutage {
				t.Errorf("Classify(%v) = %s, want outage", err, got)
			}
		}
	}
	if got := koto.ClassOf(sarama.ErrProducerFenced); got == koto.ClassOutage {
		t.Errorf("Classify(PRODUCER_FENCED) = outage; a fenced transactional producer does not recover by retrying")
	}
}
