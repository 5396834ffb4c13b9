package cqrs

import (
	"errors"
	"fmt"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/google/uuid"
)

type plainEvent struct {
	N int `json:"n"`
}

type keyedEvent struct{ ID, Key string }

func (e keyedEvent) MessageID() string    { return e.ID }
func (e keyedEvent) PartitionKey() string { return e.Key }

// pointerKeyed has its methods on the pointer only.
type pointerKeyed struct{ Key string }

func (e *pointerKeyed) PartitionKey() string { return e.Key }
func (e *pointerKeyed) MessageID() string    { return "id-" + e.Key }

func TestMarshal(t *testing.T) {
	tests := []struct {
		v                 any
		wantID, wantKey   string
		wantName, payload string
	}{
		{plainEvent{N: 1}, "", "", "plain", `{"n":1}`},
		{&plainEvent{N: 2}, "", "", "plain", `{"n":2}`},
		{keyedEvent{ID: "e-1", Key: "agg-1"}, "e-1", "agg-1", "keyed", `{"ID":"e-1","Key":"agg-1"}`},
		{keyedEvent{}, "", "", "keyed", `{"ID":"","Key":""}`},
		{pointerKeyed{Key: "k"}, "id-k", "k", "pointer-keyed", `{"Key":"k"}`},
		{&pointerKeyed{Key: "p"}, "id-p", "p", "pointer-keyed", `{"Key":"p"}`},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%T", tt.v), func(t *testing.T) {
			msg, err := new(encoder).encode(tt.v, new(encoder).name(tt.v))
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantID != "" && msg.UUID != tt.wantID {
				t.Errorf("UUID = %q, want %q", msg.UUID, tt.wantID)
			}
			if tt.wantID == "" {
				if u, err := uuid.Parse(msg.UUID); err != nil || u.Version() != 7 {
					t.Errorf("UUID = %q, want a UUIDv7", msg.UUID)
				}
			}
			if got := msg.Metadata.Get(koto.PartitionKeyMetadataKey); got != tt.wantKey {
				t.Errorf("partition key = %q, want %q", got, tt.wantKey)
			}
			if _, ok := msg.Metadata[koto.PartitionKeyMetadataKey]; !ok && tt.wantKey != "" || ok && tt.wantKey == "" {
				t.Errorf("partition key present = %v, want %v", ok, tt.wantKey != "")
			}
			if got := msg.Metadata.Get(koto.TypeNameMetadataKey); got != tt.wantName {
				t.Errorf("type name = %q, want %q", got, tt.wantName)
			}
			if string(msg.Payload) != tt.payload {
				t.Errorf("payload = %s, want %s", msg.Payload, tt.payload)
			}
		})
	}
	if _, err := new(encoder).encode(struct{}{}, new(encoder).name(struct{}{})); err == nil {
		t.Error("Marshal of an unnamed type succeeded")
	}
	if _, err := new(encoder).encode(badJSON{}, "bad-json"); err == nil {
		t.Error("Marshal of an unencodable value succeeded")
	}
}

type badJSON struct{ C chan int }

func TestHandlerError(t *testing.T) {
	notFound := &HandlerError{Kind: "not-found", Message: "not found"}
	err := fmt.Errorf("order 7: %w", notFound)
	if !errors.Is(err, &HandlerError{Kind: "not-found"}) {
		t.Error("errors.Is does not match the same kind")
	}
	if errors.Is(err, &HandlerError{Kind: "conflict"}) {
		t.Error("errors.Is matches another kind")
	}
	if got := replyError(err); got.Kind != "not-found" || got.Message != "order 7: not found" {
		t.Errorf("replyError = %+v", got)
	}
	if got := replyError(errors.New("boom")); got.Kind != KindInternal || got.Message != "boom" {
		t.Errorf("replyError of a plain error = %+v", got)
	}
	if got := (&HandlerError{Kind: "k"}).Error(); got != "k" {
		t.Errorf("Error() without message = %q", got)
	}
}

// versioned names itself from a field: its name is asked each time, not
// resolved once per type like a kebab-case name.
type versioned struct{ V int }

func (v versioned) TypeName() string { return fmt.Sprintf("versioned-v%d", v.V) }

// selfNamedByPointer names itself on the pointer only.
type selfNamedByPointer struct{}

func (*selfNamedByPointer) TypeName() string { return "by-pointer" }

func TestEncoderResolvesEachTypeOnce(t *testing.T) {
	var e encoder
	for i, tt := range []struct {
		v    any
		want string
	}{
		{plainEvent{}, "plain"},
		{&plainEvent{}, "plain"},
		{versioned{V: 1}, "versioned-v1"},
		{versioned{V: 2}, "versioned-v2"},
		{selfNamedByPointer{}, "by-pointer"},
		{plainEvent{}, "plain"},
	} {
		if got := e.name(tt.v); got != tt.want {
			t.Errorf("%d: name(%T) = %q, want %q", i, tt.v, got, tt.want)
		}
	}
	n := 0
	e.types.Range(func(any, any) bool { n++; return true })
	if n != 4 {
		t.Errorf("%d types resolved, want 4 (plainEvent, *plainEvent, versioned, selfNamedByPointer)", n)
	}
}
