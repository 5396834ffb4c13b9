package koto_test

import (
	"context"
	"reflect"
	"testing"

	koto "github.com/koto-dev/watermill-koto"
)

// TestRecordsInContext: the consumed record and the record to write are
// two values of a context, each reported only where it was given, so that
// a message published from a handler is not taken for a dead letter.
func TestRecordsInContext(t *testing.T) {
	consumed := koto.Record{Key: []byte("k"), Value: []byte("v"), Headers: []koto.Header{{Key: []byte("ce_id"), Value: []byte("1")}}}
	verbatim := koto.Record{Value: []byte("dead letter")}
	ctx := koto.ContextWithConsumedRecord(context.Background(), consumed)
	if _, ok := koto.VerbatimFromContext(ctx); ok {
		t.Error("a consumed record's context marks its messages verbatim")
	}
	ctx = koto.ContextWithVerbatim(ctx, verbatim)
	if got, ok := koto.ConsumedRecordFromContext(ctx); !ok || !reflect.DeepEqual(got, consumed) {
		t.Errorf("ConsumedRecordFromContext = %+v, %v; want %+v", got, ok, consumed)
	}
	if got, ok := koto.VerbatimFromContext(ctx); !ok || !reflect.DeepEqual(got, verbatim) {
		t.Errorf("VerbatimFromContext = %+v, %v; want %+v", got, ok, verbatim)
	}
	if _, ok := koto.ConsumedRecordFromContext(context.Background()); ok {
		t.Error("a context without a record reports one")
	}
}
