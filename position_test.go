package koto_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"
)

// TestPositionInContext: a context carries the position it was given, a
// context without one reports none, and a nested position replaces the
// outer one.
func TestPositionInContext(t *testing.T) {
	if p, ok := koto.PositionFromContext(context.Background()); ok {
		t.Fatalf("PositionFromContext(Background) = %+v, true; want none", p)
	}
	outer := koto.Position{Topic: "orders", Partition: 2, Offset: 41}
	inner := koto.Position{Topic: "orders", Partition: 2, Offset: 42, Key: []byte("o-1"), Timestamp: time.Unix(1700000000, 0)}
	ctx := koto.ContextWithPosition(context.Background(), outer)
	if got, ok := koto.PositionFromContext(ctx); !ok || !reflect.DeepEqual(got, outer) {
		t.Errorf("PositionFromContext = %+v, %v; want %+v", got, ok, outer)
	}
	ctx = koto.ContextWithPosition(ctx, inner)
	if got, ok := koto.PositionFromContext(ctx); !ok || !reflect.DeepEqual(got, inner) {
		t.Errorf("nested PositionFromContext = %+v, %v; want %+v", got, ok, inner)
	}
}
