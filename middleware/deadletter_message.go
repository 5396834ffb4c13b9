package middleware

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/koto-dev/watermill-koto/internal/dlqmeta"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/correlation"
)

// droppedValueMax bounds each metadata value of a dead letter sent without
// its payload, so that a huge reason cannot make it too large again.
const droppedValueMax = 1024

// droppedLetter returns dl without its payload and with only the dead
// letter's own keys, the correlation ID and the partition key, marked with
// [dlqmeta.Dropped]: what reaches the dead-letter topic when dl was
// refused as too large (err).
func droppedLetter(dl *message.Message, err error) *message.Message {
	out := message.NewMessage(dl.UUID, nil)
	out.SetContext(dl.Context())
	for _, k := range []string{
		dlqmeta.Reason, dlqmeta.ErrorType, dlqmeta.ErrorClass, dlqmeta.OriginalTopic,
		dlqmeta.OriginalPartition, dlqmeta.OriginalOffset, dlqmeta.ConsumerGroup,
		dlqmeta.Handler, dlqmeta.Attempts, dlqmeta.FailedAt,
		correlation.MetadataKey, koto.PartitionKeyMetadataKey,
	} {
		if v, ok := dl.Metadata[k]; ok {
			out.Metadata.Set(k, truncate(v, droppedValueMax))
		}
	}
	out.Metadata.Set(dlqmeta.Dropped, truncate(fmt.Sprintf(
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
func deadLetterMessage(msg *message.Message, cause error, class koto.Class, attempts int, group string) *message.Message {
	ctx := msg.Context()
	dl := msg.Copy()
	// The delivery's context values, so that a publisher that traces makes
	// the dead letter's span a child of the delivery's; not its
	// cancellation, which would cut the publish short.
	dl.SetContext(context.WithoutCancel(ctx))
	correlation.Stamp(ctx, dl)
	pos := positionFrom(ctx, message.SubscribeTopicFromCtx(ctx))
	md := dl.Metadata
	md.Set(dlqmeta.Reason, cause.Error())
	md.Set(dlqmeta.ErrorType, rootCauseType(cause))
	md.Set(dlqmeta.ErrorClass, class.String())
	md.Set(dlqmeta.OriginalTopic, pos.Topic)
	if pos.kafka {
		md.Set(dlqmeta.OriginalPartition, pos.partitionString())
		md.Set(dlqmeta.OriginalOffset, pos.offsetString())
	} else {
		delete(md, dlqmeta.OriginalPartition)
		delete(md, dlqmeta.OriginalOffset)
	}
	md.Set(dlqmeta.ConsumerGroup, group)
	md.Set(dlqmeta.Handler, message.HandlerNameFromCtx(ctx))
	md.Set(dlqmeta.Attempts, strconv.Itoa(attempts))
	md.Set(dlqmeta.FailedAt, time.Now().UTC().Format(time.RFC3339Nano))
	// Replayed with these, the message would be taken for a copy of a
	// parked one.
	delete(md, ParkedIDKey)
	delete(md, ParkedGroupKey)
	return dl
}

// withParking gives the dead letter dl of a parked message where it was
// consumed first, which a replay returns it to, and the history of its
// parking.
func withParking(dl *message.Message, entry *Parked) {
	md := dl.Metadata
	md.Set(dlqmeta.OriginalTopic, entry.Position.Topic)
	md.Set(dlqmeta.OriginalPartition, strconv.FormatInt(int64(entry.Position.Partition), 10))
	md.Set(dlqmeta.OriginalOffset, strconv.FormatInt(entry.Position.Offset, 10))
	if h, err := json.Marshal(entry.History); err == nil {
		md.Set(dlqmeta.History, string(h))
	}
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
