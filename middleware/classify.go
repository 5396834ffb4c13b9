package middleware

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/IBM/sarama"
	wmmiddleware "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/koto-dev/watermill-koto/idempotency"
)

// ErrorClass is what [DeadLetter] does with a handler error; the package
// doc describes each.
type ErrorClass int

const (
	// ClassRetryable: retried a bounded number of times, then dead-lettered.
	ClassRetryable ErrorClass = iota
	// ClassPoison: the message is dead-lettered at once.
	ClassPoison
	// ClassOutage: retried until it succeeds, never dead-lettered.
	ClassOutage
)

// String returns "retryable", "poison" or "outage", the value of the
// error_class log attribute and of [DeadLetterErrorClassKey].
func (c ErrorClass) String() string {
	switch c {
	case ClassPoison:
		return "poison"
	case ClassOutage:
		return "outage"
	default:
		return "retryable"
	}
}

// Classify is the default classification of handler errors.
//
// An explicit mark decides first: the mark nearest the top of the error
// chain wins, so Outage(Poison(err)) is an outage. [PoisonError] and
// [PanicError] are [ClassPoison], [OutageError] is [ClassOutage].
//
// Without a mark, these are [ClassOutage] anywhere in the chain:
// [idempotency.ErrStoreUnavailable], context.DeadlineExceeded (a dependency
// timed out), any net.Error, a pgconn.ConnectError, a pgx error that pgconn
// reports safe to retry or a timeout, and a PostgreSQL error of SQLSTATE
// class 08 (connection), 53 (insufficient resources), 57P (shutdown,
// cannot connect now) or 58 (system error); and these Kafka errors, also
// inside a sarama.ProducerError, or when every message of a
// sarama.ProducerErrors batch failed with one:
//   - sarama's ErrOutOfBrokers, ErrNotConnected and ErrControllerNotAvailable
//     (no broker or controller can be reached), ErrClosedClient and
//     ErrShuttingDown (the process's own client is closing, usually because
//     the service stops: the message is nacked, not dead-lettered);
//   - the Kafka protocol errors that say a broker, a partition leader, the
//     in-sync replicas, the controller, a coordinator or the network is
//     unavailable for now (sarama's KError of each name):
//     LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
//     BROKER_NOT_AVAILABLE, REPLICA_NOT_AVAILABLE, NETWORK_EXCEPTION,
//     COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
//     NOT_COORDINATOR, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
//     NOT_CONTROLLER, KAFKA_STORAGE_ERROR (an offline log directory),
//     FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
//     PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE and
//     THROTTLING_QUOTA_EXCEEDED. Kafka flags all of them retriable but
//     BROKER_NOT_AVAILABLE, which says the same of a broker;
//   - the producer-state errors that a retry clears: OUT_OF_ORDER_SEQUENCE_NUMBER,
//     INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING and
//     UNKNOWN_PRODUCER_ID. The broker lost or rejects the idempotent
//     producer's sequence (after a restart without its data, a truncated log
//     or an expired producer ID) and did not write the record; sarama then
//     starts a new sequence, so the record can be sent again without being
//     duplicated. They say nothing about the message: a command whose
//     handler has run and whose reply fails with one is never dead-lettered.
//
// Kafka flags a few errors of the request retriable too; they are not
// outages here, because retrying them for ever would block the partition
// when the request is wrong: UNKNOWN_TOPIC_OR_PARTITION (a misspelt topic),
// CORRUPT_MESSAGE, and the consumer's offset and fetch-session errors. They
// and every other Kafka error are [ClassRetryable].
//
// Then a panic recovered by Watermill's Recoverer is [ClassPoison].
// Everything else is [ClassRetryable], JSON errors included (the package
// doc says why).
func Classify(err error) ErrorClass {
	if class, ok := markedClass(err); ok {
		return class
	}
	if isOutage(err) {
		return ClassOutage
	}
	if isPoison(err) {
		return ClassPoison
	}
	return ClassRetryable
}

// markedClass walks the error tree top down and returns the class of the
// first explicit mark.
func markedClass(err error) (ErrorClass, bool) {
	switch e := err.(type) {
	case nil:
		return ClassRetryable, false
	case *PoisonError, *PanicError:
		return ClassPoison, true
	case *OutageError:
		return ClassOutage, true
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if class, ok := markedClass(inner); ok {
				return class, true
			}
		}
		return ClassRetryable, false
	case interface{ Unwrap() error }:
		return markedClass(e.Unwrap())
	}
	return ClassRetryable, false
}

func isOutage(err error) bool {
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, idempotency.ErrStoreUnavailable),
		errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr),
		errors.As(err, &connectErr),
		pgconn.SafeToRetry(err),
		pgconn.Timeout(err),
		isKafkaOutage(err):
		return true
	case errors.As(err, &pgErr):
		return outageSQLState(pgErr.Code)
	}
	return false
}

// outageSQLState reports whether a PostgreSQL error code says the server,
// not the statement, is the problem.
func outageSQLState(code string) bool {
	for _, prefix := range []string{"08", "53", "57P", "58"} {
		if strings.HasPrefix(code, prefix) {
			return true
		}
	}
	return false
}

// kafkaOutageCodes are the Kafka protocol errors that say a broker, a
// partition leader, replicas, the controller, a coordinator or the network is
// unavailable for now. Kafka flags each of them retriable, except
// BROKER_NOT_AVAILABLE, which says the same of a broker.
var kafkaOutageCodes = map[sarama.KError]bool{
	sarama.ErrLeaderNotAvailable:              true, // 5 LEADER_NOT_AVAILABLE
	sarama.ErrNotLeaderForPartition:           true, // 6 NOT_LEADER_OR_FOLLOWER
	sarama.ErrRequestTimedOut:                 true, // 7 REQUEST_TIMED_OUT
	sarama.ErrBrokerNotAvailable:              true, // 8 BROKER_NOT_AVAILABLE
	sarama.ErrReplicaNotAvailable:             true, // 9 REPLICA_NOT_AVAILABLE
	sarama.ErrNetworkException:                true, // 13 NETWORK_EXCEPTION
	sarama.ErrOffsetsLoadInProgress:           true, // 14 COORDINATOR_LOAD_IN_PROGRESS
	sarama.ErrConsumerCoordinatorNotAvailable: true, // 15 COORDINATOR_NOT_AVAILABLE
	sarama.ErrNotCoordinatorForConsumer:       true, // 16 NOT_COORDINATOR
	sarama.ErrNotEnoughReplicas:               true, // 19 NOT_ENOUGH_REPLICAS
	sarama.ErrNotEnoughReplicasAfterAppend:    true, // 20 NOT_ENOUGH_REPLICAS_AFTER_APPEND
	sarama.ErrNotController:                   true, // 41 NOT_CONTROLLER
	sarama.ErrKafkaStorageError:               true, // 56 KAFKA_STORAGE_ERROR (offline log directory)
	sarama.ErrFencedLeaderEpoch:               true, // 74 FENCED_LEADER_EPOCH
	sarama.ErrUnknownLeaderEpoch:              true, // 75 UNKNOWN_LEADER_EPOCH
	sarama.ErrPreferredLeaderNotAvailable:     true, // 80 PREFERRED_LEADER_NOT_AVAILABLE
	sarama.ErrEligibleLeadersNotAvailable:     true, // 83 ELIGIBLE_LEADERS_NOT_AVAILABLE
	sarama.ErrThrottlingQuotaExceeded:         true, // 89 THROTTLING_QUOTA_EXCEEDED
}

// kafkaProducerStateCodes are the Kafka protocol errors of an idempotent
// producer whose state the broker lost or rejects; sarama bumps the
// producer epoch when it returns one, so that the next attempt succeeds.
var kafkaProducerStateCodes = map[sarama.KError]bool{
	sarama.ErrOutOfOrderSequenceNumber: true, // 45 OUT_OF_ORDER_SEQUENCE_NUMBER
	sarama.ErrInvalidProducerEpoch:     true, // 47 INVALID_PRODUCER_EPOCH
	sarama.ErrInvalidProducerIDMapping: true, // 49 INVALID_PRODUCER_ID_MAPPING
	sarama.ErrUnknownProducerID:        true, // 59 UNKNOWN_PRODUCER_ID
}

// kafkaClientOutages are sarama's own errors for a cluster it cannot reach
// or a client that is shutting down.
var kafkaClientOutages = []error{
	sarama.ErrOutOfBrokers,
	sarama.ErrNotConnected,
	sarama.ErrControllerNotAvailable,
	sarama.ErrClosedClient,
	sarama.ErrShuttingDown,
}

// isKafkaOutage reports whether err is one of the Kafka outages that
// [Classify] lists, anywhere in its chain. A sarama.ProducerError counts as
// the error it wraps; sarama.ProducerErrors (a failed batch, which does not
// unwrap) is an outage when every message in it failed with one.
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
	if errors.As(err, &code) && (kafkaOutageCodes[code] || kafkaProducerStateCodes[code]) {
		return true
	}
	for _, target := range kafkaClientOutages {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

func isPoison(err error) bool {
	var recovered wmmiddleware.RecoveredPanicError
	return errors.As(err, &recovered)
}
