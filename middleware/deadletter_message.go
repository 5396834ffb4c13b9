package middleware

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
)

// Metadata keys that [DeadLetter] adds to a dead letter, for the tools that
// read dead letters. A key already present (a dead letter that was
// replayed and failed again) is overwritten.
const (
	// DeadLetterReasonKey holds the text of the handler's error.
	DeadLetterReasonKey = "dead_letter_reason"
	// DeadLetterErrorTypeKey holds the Go type of the error's root cause,
	// the innermost error of its Unwrap chain (e.g. "*json.SyntaxError"),
	// or "*middleware.PanicError" for a panic.
	DeadLetterErrorTypeKey = "dead_letter_error_type"
	// DeadLetterErrorClassKey holds the [ErrorClass]: "poison" or
	// "retryable".
	DeadLetterErrorClassKey = "dead_letter_error_class"
	// DeadLetterOriginalTopicKey holds the topic the message was consumed from.
	DeadLetterOriginalTopicKey = "dead_letter_original_topic"
	// DeadLetterOriginalPartitionKey holds the Kafka partition it was consumed
	// from, in decimal; absent when the subscriber is not Kafka.
	DeadLetterOriginalPartitionKey = "dead_letter_original_partition"
	// DeadLetterOriginalOffsetKey holds its offset in that partition, in decimal;
	// absent when the subscriber is not Kafka.
	DeadLetterOriginalOffsetKey = "dead_letter_original_offset"
	// DeadLetterConsumerGroupKey holds the consumer group that failed it.
	DeadLetterConsumerGroupKey = "dead_letter_consumer_group"
	// DeadLetterHandlerKey holds the name of the router handler.
	DeadLetterHandlerKey = "dead_letter_handler"
	// DeadLetterAttemptsKey holds how many times the handler ran in the
	// delivery that dead-lettered it, in decimal.
	DeadLetterAttemptsKey = "dead_letter_attempts"
	// DeadLetterFailedAtKey holds when it was dead-lettered, in UTC,
	// RFC 3339 with nanoseconds.
	DeadLetterFailedAtKey = "dead_letter_failed_at"
	// DeadLetterDroppedKey is set on a dead letter that Kafka refused as
	// too large: it was sent again without its payload and with only the
	// keys above (cut to 1 KiB each), the correlation ID and the partition
	// key, and this key says why (see the package doc, Dead letters).
	DeadLetterDroppedKey = "dead_letter_dropped"
)

// droppedValueMax bounds each metadata value of a dead letter sent without
// its payload, so that a huge reason cannot make it too large again.
const droppedValueMax = 1024

// tooLarge reports whether a publish failed because the record is larger
// than the broker, or the producer's MaxMessageBytes, accepts.
func tooLarge(err error) bool {
	var cfgErr sarama.ConfigurationError
	return errors.Is(err, sarama.ErrMessageSizeTooLarge) ||
		errors.As(err, &cfgErr) && strings.Contains(string(cfgErr), "MaxMessageBytes")
}

// droppedLetter returns dl without its payload and with only the dead
// letter's own keys, the correlation ID and the partition key, marked with
// [DeadLetterDroppedKey]: what reaches the dead-letter topic when dl was
// refused as too large (err).
func droppedLetter(dl *message.Message, err error) *message.Message {
	out := message.NewMessage(dl.UUID, nil)
	out.SetContext(dl.Context())
	for _, k := range []string{
		DeadLetterReasonKey, DeadLetterErrorTypeKey, DeadLetterErrorClassKey, DeadLetterOriginalTopicKey,
		DeadLetterOriginalPartitionKey, DeadLetterOriginalOffsetKey, DeadLetterConsumerGroupKey,
		DeadLetterHandlerKey, DeadLetterAttemptsKey, DeadLetterFailedAtKey,
		correlation.MetadataKey, broker.PartitionKeyMetadataKey,
	} {
		if v, ok := dl.Metadata[k]; ok {
			out.Metadata.Set(k, truncate(v, droppedValueMax))
		}
	}
	out.Metadata.Set(DeadLetterDroppedKey, truncate(fmt.Sprintf(
		"payload (%d bytes) and %d metadata entries left out: the dead letter was too large (%v)",
		len(dl.Payload), len(dl.Metadata), err), droppedValueMax))
	return out
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// deadLetterMessage returns the dead letter of msg: a copy with the
// metadata above.
func deadLetterMessage(msg *message.Message, cause error, class ErrorClass, attempts int, group string) *message.Message {
	ctx := msg.Context()
	dl := msg.Copy()
	// The delivery's context values, so that a publisher that traces makes
	// the dead letter's span a child of the delivery's; not its
	// cancellation, which would cut the publish short.
	dl.SetContext(context.WithoutCancel(ctx))
	correlation.Stamp(ctx, dl)
	pos := positionFrom(ctx, message.SubscribeTopicFromCtx(ctx))
	md := dl.Metadata
	md.Set(DeadLetterReasonKey, cause.Error())
	md.Set(DeadLetterErrorTypeKey, rootCauseType(cause))
	md.Set(DeadLetterErrorClassKey, class.String())
	md.Set(DeadLetterOriginalTopicKey, pos.topic)
	if pos.kafka {
		md.Set(DeadLetterOriginalPartitionKey, pos.partitionString())
		md.Set(DeadLetterOriginalOffsetKey, pos.offsetString())
	} else {
		delete(md, DeadLetterOriginalPartitionKey)
		delete(md, DeadLetterOriginalOffsetKey)
	}
	md.Set(DeadLetterConsumerGroupKey, group)
	md.Set(DeadLetterHandlerKey, message.HandlerNameFromCtx(ctx))
	md.Set(DeadLetterAttemptsKey, strconv.Itoa(attempts))
	md.Set(DeadLetterFailedAtKey, time.Now().UTC().Format(time.RFC3339Nano))
	return dl
}

// rootCauseType returns the Go type of the innermost error of err's Unwrap
// chain; a panic stops the descent, so that it shows as a panic.
func rootCauseType(err error) string {
	for {
		if _, ok := err.(*PanicError); ok {
			break
		}
		inner := errors.Unwrap(err)
		if inner == nil {
			break
		}
		err = inner
	}
	return fmt.Sprintf("%T", err)
}
