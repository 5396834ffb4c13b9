package correlation_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/google/uuid"

	"github.com/koto-dev/watermill-koto/correlation"
)

func TestMetadataKeyMatchesWatermill(t *testing.T) {
	if correlation.MetadataKey != middleware.CorrelationIDMetadataKey {
		t.Fatalf("MetadataKey = %q, Watermill uses %q", correlation.MetadataKey, middleware.CorrelationIDMetadataKey)
	}
}

func TestContext(t *testing.T) {
	ctx := context.Background()
	if got := correlation.FromContext(ctx); got != "" {
		t.Fatalf("empty context has ID %q", got)
	}
	ctx = correlation.WithID(ctx, "abc")
	if got := correlation.FromContext(ctx); got != "abc" {
		t.Fatalf("FromContext = %q, want abc", got)
	}
	if _, id := correlation.Ensure(ctx); id != "abc" {
		t.Fatalf("Ensure replaced an existing ID with %q", id)
	}
	ctx2, id := correlation.Ensure(context.Background())
	if id == "" || correlation.FromContext(ctx2) != id {
		t.Fatalf("Ensure on an empty context gave %q / %q", id, correlation.FromContext(ctx2))
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := correlation.NewID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 {
			t.Fatalf("NewID() = %q, want a UUIDv7 (err %v)", id, err)
		}
		if seen[id] {
			t.Fatalf("NewID repeated %q", id)
		}
		seen[id] = true
	}
}

func TestMessageAndStamp(t *testing.T) {
	fresh := message.NewMessage("1", nil)
	kept := message.NewMessage("2", nil)
	kept.Metadata.Set(correlation.MetadataKey, "theirs")

	correlation.Stamp(context.Background(), fresh)
	if got := correlation.FromMessage(fresh); got != "" {
		t.Fatalf("Stamp without an ID in the context set %q", got)
	}
	correlation.Stamp(correlation.WithID(context.Background(), "ours"), fresh, kept)
	if got := correlation.FromMessage(fresh); got != "ours" {
		t.Fatalf("stamped message has %q, want ours", got)
	}
	if got := correlation.FromMessage(kept); got != "theirs" {
		t.Fatalf("Stamp overwrote an existing ID with %q", got)
	}
}

func ExampleStamp() {
	ctx := correlation.WithID(context.Background(), "req-42")
	msg := message.NewMessage("6f1c7c1e-0000-7000-8000-000000000001", []byte(`{}`))
	correlation.Stamp(ctx, msg)
	fmt.Println(correlation.FromMessage(msg))
	// Output: req-42
}
