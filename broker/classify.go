package broker

import (
	"errors"
	"strings"

	"github.com/IBM/sarama"

	koto "github.com/koto-dev/watermill-koto"
)

// classified returns err marked as koto.Outage when Kafka or sarama says
// the cluster, not the message, is the problem (the list is in the
// package doc, Errors), and wrapping koto.ErrMessageTooLarge when the
// record is larger than the broker or the producer accepts. Other errors
// are returned as they are.
func classified(err error) error {
	switch {
	case err == nil:
		return nil
	case tooLarge(err):
		return errors.Join(koto.ErrMessageTooLarge, err)
	case isKafkaOutage(err):
		return koto.Outage(err)
	}
	return err
}

func tooLarge(err error) bool {
	var cfgErr sarama.ConfigurationError
	return errors.Is(err, sarama.ErrMessageSizeTooLarge) ||
		errors.As(err, &cfgErr) && strings.Contains(string(cfgErr), "MaxMessageBytes")
}

// kafkaOutages are the Kafka protocol errors that say a broker, a partition
// leader, the replicas, the controller, a coordinator or the network is
// unavailable for now, and the producer-state errors that a retry clears
// (sarama bumps the producer epoch when it returns one).
var kafkaOutages = map[sarama.KError]bool{
	sarama.ErrLeaderNotAvailable:              true,
	sarama.ErrNotLeaderForPartition:           true,
	sarama.ErrRequestTimedOut:                 true,
	sarama.ErrBrokerNotAvailable:              true,
	sarama.ErrReplicaNotAvailable:             true,
	sarama.ErrNetworkException:                true,
	sarama.ErrOffsetsLoadInProgress:           true,
	sarama.ErrConsumerCoordinatorNotAvailable: true,
	sarama.ErrNotCoordinatorForConsumer:       true,
	sarama.ErrNotEnoughReplicas:               true,
	sarama.ErrNotEnoughReplicasAfterAppend:    true,
	sarama.ErrNotController:                   true,
	sarama.ErrKafkaStorageError:               true,
	sarama.ErrFencedLeaderEpoch:               true,
	sarama.ErrUnknownLeaderEpoch:              true,
	sarama.ErrPreferredLeaderNotAvailable:     true,
	sarama.ErrEligibleLeadersNotAvailable:     true,
	sarama.ErrThrottlingQuotaExceeded:         true,
	sarama.ErrOutOfOrderSequenceNumber:        true,
	sarama.ErrInvalidProducerEpoch:            true,
	sarama.ErrInvalidProducerIDMapping:        true,
	sarama.ErrUnknownProducerID:               true,
}

// clientOutages are sarama's own errors for a cluster it cannot reach or a
// client that is shutting down.
var clientOutages = []error{
	sarama.ErrOutOfBrokers,
	sarama.ErrNotConnected,
	sarama.ErrControllerNotAvailable,
	sarama.ErrClosedClient,
	sarama.ErrShuttingDown,
}

// isKafkaOutage reports whether err is one of those outages anywhere in its
// chain. sarama.ProducerErrors (a failed batch, which does not unwrap) is
// one when every message in it failed with one.
func isKafkaOutage(err error) bool {
	var batch sarama.ProducerErrors
	if errors.As(err, &batch) && len(batch) > 0 {
		for _, pe := range batch {
			if pe == nil || !isKafkaOutage(pe.Err) {
				return false
			}
		}
		return true
	}
	var code sarama.KError
	if errors.As(err, &code) && kafkaOutages[code] {
		return true
	}
	for _, target := range clientOutages {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
