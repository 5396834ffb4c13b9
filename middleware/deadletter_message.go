package middleware

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

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
)

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
