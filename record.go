package koto

import "context"

// Record is a Kafka record byte for byte, whatever mapping reads or
// writes it: its key, its headers in order, its value.
type Record struct {
	// Key is the record key; nil when the record has none.
	Key []byte
	// Headers are the record's headers, in the order they were written.
	Headers []Header
	// Value is the record's value.
	Value []byte
}

// Header is a header of a [Record].
type Header struct {
	Key, Value []byte
}

type (
	consumedKey struct{}
	verbatimKey struct{}
)

// ContextWithConsumedRecord returns ctx carrying rec, the record a message
// was read from. The broker's subscriber puts it in every message's
// context, so that a dead letter can be the record as it was consumed.
func ContextWithConsumedRecord(ctx context.Context, rec Record) context.Context {
	return context.WithValue(ctx, consumedKey{}, rec)
}

// ConsumedRecordFromContext returns the record in ctx that a message was
// read from, and whether there is one.
func ConsumedRecordFromContext(ctx context.Context) (Record, bool) {
	rec, ok := ctx.Value(consumedKey{}).(Record)
	return rec, ok
}

// ContextWithVerbatim returns ctx marking the message published with it
// to be written as rec: the broker's publisher writes rec's key, headers
// and value as they are instead of mapping the message, whatever its
// record mapping. The dead-letter middleware marks its dead letters so.
// A publisher that is not Kafka's ignores the mark and publishes the
// message.
func ContextWithVerbatim(ctx context.Context, rec Record) context.Context {
	return context.WithValue(ctx, verbatimKey{}, rec)
}

// VerbatimFromContext returns the record that ctx marks a message to be
// written as ([ContextWithVerbatim]), and whether there is one.
func VerbatimFromContext(ctx context.Context) (Record, bool) {
	rec, ok := ctx.Value(verbatimKey{}).(Record)
	return rec, ok
}
