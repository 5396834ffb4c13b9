package middleware

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// droppedHeadersMax bounds the headers of the consumed record that such a
// dead letter keeps, besides its own.
const droppedHeadersMax = 16 * droppedValueMax

// failureKeys are the dead-letter metadata keys that the middleware owns:
// it writes them, overwriting those of an earlier failure.
var failureKeys = []string{
	dlqmeta.Reason, dlqmeta.ErrorType, dlqmeta.ErrorClass, dlqmeta.OriginalTopic,
	dlqmeta.OriginalPartition, dlqmeta.OriginalOffset, dlqmeta.ConsumerGroup,
	dlqmeta.Handler, dlqmeta.Attempts, dlqmeta.FailedAt, dlqmeta.History, dlqmeta.Dropped,
}

// parkingKeys are the keys of a parked message come back, which its dead
// letter leaves out: replayed with them, it would be taken for a copy of a
// parked one.
var parkingKeys = []string{ParkedIDKey, ParkedGroupKey}

// droppedLetter returns dl without its payload, marked with
// [dlqmeta.Dropped]: what reaches the dead-letter topic when dl was
// refused as too large (err). A dead letter of a consumed record keeps the
// record's key and the headers of at most droppedValueMax bytes, up to
// droppedHeadersMax of them; another keeps only the failure's keys, the
// correlation ID and the partition key. The failure's keys are cut to
// droppedValueMax either way.
func droppedLetter(dl *message.Message, err error) *message.Message {
	out := message.NewMessage(dl.UUID, nil)
	out.SetContext(dl.Context())
	for _, k := range slices.Concat(failureKeys, []string{correlation.MetadataKey, koto.PartitionKeyMetadataKey}) {
		if v, ok := dl.Metadata[k]; ok {
			out.Metadata.Set(k, truncate(v, droppedValueMax))
		}
	}
	rec, verbatim := koto.VerbatimFromContext(dl.Context())
	if !verbatim {
		out.Metadata.Set(dlqmeta.Dropped, truncate(fmt.Sprintf(
			"payload (%d bytes) and %d metadata entries left out: the dead letter was too large (%v)",
			len(dl.Payload), len(dl.Metadata), err), droppedValueMax))
		return out
	}
	kept, left := droppedRecord(rec)
	why := truncate(fmt.Sprintf("value (%d bytes) and %d headers left out: the dead letter was too large (%v)",
		len(rec.Value), left, err), droppedValueMax)
	out.Metadata.Set(dlqmeta.Dropped, why)
	kept.Headers = append(kept.Headers, koto.Header{Key: []byte(dlqmeta.Dropped), Value: []byte(why)})
	out.SetContext(koto.ContextWithVerbatim(dl.Context(), kept))
	return out
}

// droppedRecord returns rec without its value and with the headers that
// droppedLetter keeps, and how many it left out.
func droppedRecord(rec koto.Record) (kept koto.Record, left int) {
	if len(rec.Key) <= droppedValueMax {
		kept.Key = rec.Key
	}
	budget := droppedHeadersMax
	for _, h := range rec.Headers {
		switch n := len(h.Key) + len(h.Value); {
		case slices.Contains(failureKeys, string(h.Key)):
			kept.Headers = append(kept.Headers, koto.Header{Key: h.Key, Value: []byte(truncate(string(h.Value), droppedValueMax))})
		case len(h.Value) <= droppedValueMax && n <= budget:
			budget -= n
			kept.Headers = append(kept.Headers, h)
		default:
			left++
		}
	}
	return kept, left
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// deadLetterMessage returns the dead letter of msg: a copy with the
// failure's metadata. A message read from a Kafka record
// (koto.ConsumedRecordFromContext) is marked to be written as that record
// with the failure's entries as headers (koto.ContextWithVerbatim). The
// dead letter of a parked message, entry, names where it was consumed
// first, which a replay returns it to, and the history of its parking.
func deadLetterMessage(msg *message.Message, cause error, class koto.Class, attempts int, group string, entry *Parked) *message.Message {
	ctx := msg.Context()
	dl := msg.Copy()
	hadCorrelation := correlation.FromMessage(msg) != ""
	correlation.Stamp(ctx, dl)
	pos := positionFrom(ctx, message.SubscribeTopicFromCtx(ctx))
	if entry != nil {
		pos.Position = entry.Position
	}
	entries := [][2]string{
		{dlqmeta.Reason, cause.Error()},
		{dlqmeta.ErrorType, rootCauseType(cause)},
		{dlqmeta.ErrorClass, class.String()},
		{dlqmeta.OriginalTopic, pos.Topic},
	}
	if pos.kafka {
		entries = append(entries, [2]string{dlqmeta.OriginalPartition, pos.partitionString()},
			[2]string{dlqmeta.OriginalOffset, pos.offsetString()})
	}
	entries = append(entries,
		[2]string{dlqmeta.ConsumerGroup, group},
		[2]string{dlqmeta.Handler, message.HandlerNameFromCtx(ctx)},
		[2]string{dlqmeta.Attempts, strconv.Itoa(attempts)},
		[2]string{dlqmeta.FailedAt, time.Now().UTC().Format(time.RFC3339Nano)})
	if entry != nil {
		if h, err := json.Marshal(entry.History); err == nil {
			entries = append(entries, [2]string{dlqmeta.History, string(h)})
		}
	}
	md := dl.Metadata
	for _, k := range slices.Concat([]string{dlqmeta.OriginalPartition, dlqmeta.OriginalOffset, dlqmeta.History}, parkingKeys) {
		delete(md, k)
	}
	for _, e := range entries {
		md.Set(e[0], e[1])
	}
	// The delivery's context values, so that a publisher that traces makes
	// the dead letter's span a child of the delivery's; not its
	// cancellation, which would cut the publish short.
	dlCtx := context.WithoutCancel(ctx)
	if rec, ok := koto.ConsumedRecordFromContext(ctx); ok {
		if id := correlation.FromContext(ctx); !hadCorrelation && id != "" {
			entries = append([][2]string{{correlation.MetadataKey, id}}, entries...)
		}
		dlCtx = koto.ContextWithVerbatim(dlCtx, withFailure(rec, entries))
	}
	dl.SetContext(dlCtx)
	return dl
}

// withFailure returns rec with the headers of entries in place of those
// of an earlier failure.
func withFailure(rec koto.Record, entries [][2]string) koto.Record {
	headers := make([]koto.Header, 0, len(rec.Headers)+len(entries))
	for _, h := range rec.Headers {
		replaced := slices.ContainsFunc(entries, func(e [2]string) bool { return e[0] == string(h.Key) })
		if !replaced && !slices.Contains(failureKeys, string(h.Key)) && !slices.Contains(parkingKeys, string(h.Key)) {
			headers = append(headers, h)
		}
	}
	for _, e := range entries {
		headers = append(headers, koto.Header{Key: []byte(e[0]), Value: []byte(e[1])})
	}
	rec.Headers = headers
	return rec
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
