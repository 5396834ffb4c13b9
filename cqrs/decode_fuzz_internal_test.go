package cqrs

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/components/requestreply"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/topics"
)

// fuzzOrder is the message type the decoding fuzz targets consume.
type fuzzOrder struct {
	ID    int               `json:"id"`
	Items []string          `json:"items"`
	Tags  map[string]string `json:"tags"`
	Note  *string           `json:"note"`
}

// sentReplies records the replies a command consumer publishes.
type sentReplies struct {
	mu     sync.Mutex
	topics []string
	msgs   []*message.Message
}

func (p *sentReplies) Publish(topic string, msgs ...*message.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		p.topics = append(p.topics, topic)
		p.msgs = append(p.msgs, m)
	}
	return nil
}

func (p *sentReplies) Close() error { return nil }

func fuzzEnv(pub message.Publisher) *handlerEnv {
	return &handlerEnv{handlerName: "fuzz", pub: pub, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// decodes reports whether payload decodes as a T, and the T.
func decodes[T any](payload []byte) (*T, bool) {
	v := new(T)
	return v, json.Unmarshal(payload, v) == nil
}

// FuzzEventConsumerDecoding feeds an event consumer any payload and type
// name. The handler gets exactly what the payload decodes to; a payload
// that does not decode, or a message of another type, is poison (dead-
// lettered, never retried) and says why; nothing panics.
func FuzzEventConsumerDecoding(f *testing.F) {
	f.Add([]byte(`{"id":7,"items":["a"],"tags":{"k":"v"},"note":"n"}`), "")
	f.Add([]byte(`{"id":7}`), "fuzz-order")
	f.Add([]byte(`{"id":7}`), "other-type")
	f.Add([]byte(`{"id":"seven"}`), "")
	f.Add([]byte(`{"id":1e400}`), "")
	f.Add([]byte(``), "")
	f.Add([]byte(`null`), "")
	f.Add([]byte("\xff\xfe\x00"), "\xff")
	f.Add([]byte(`{"items":[`+strings.Repeat(`"x",`, 1000)+`"y"]}`), "")
	f.Add([]byte(strings.Repeat("[", 20000)), "")
	f.Fuzz(func(t *testing.T, payload []byte, typeName string) {
		var got []*fuzzOrder
		c := NewEventConsumer(func(_ context.Context, ev *fuzzOrder) error {
			got = append(got, ev)
			return nil
		})
		s := c.(*consumerSpec)
		msg := message.NewMessage("uuid", payload)
		if typeName != "" {
			msg.Metadata.Set(koto.TypeNameMetadataKey, typeName)
		}
		err := s.handle(msg, fuzzEnv(&sentReplies{}))
		want, ok := decodes[fuzzOrder](payload)
		switch {
		case typeName != "" && typeName != s.typeName:
			if !errors.Is(err, ErrUnexpectedType) || koto.ClassOf(err) != koto.ClassPoison || len(got) != 0 {
				t.Fatalf("type %q: handled %d, err %v; want a poison ErrUnexpectedType and no handling", typeName, len(got), err)
			}
		case ok:
			if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], want) {
				t.Fatalf("payload %q decodes, but the handler got %+v, err %v", payload, got, err)
			}
		default:
			if err == nil || koto.ClassOf(err) != koto.ClassPoison || len(got) != 0 ||
				!strings.Contains(err.Error(), "decoding "+s.typeName) {
				t.Fatalf("payload %q does not decode, but handled %d, err %v; want poison naming the type", payload, len(got), err)
			}
		}
	})
}

// FuzzCommandConsumerDecoding feeds a command consumer any payload and
// reply metadata. A request (reply topic and operation ID) is answered
// exactly once, on its reply topic, with the result or a bad-request
// error; an invalid reply topic makes the command poison instead; a
// command that does not decode never reaches the handler.
func FuzzCommandConsumerDecoding(f *testing.F) {
	f.Add([]byte(`{"id":7}`), "svc.replies", "op-1")
	f.Add([]byte(`{"id":7}`), "", "")
	f.Add([]byte(`{"id":"x"}`), "svc.replies", "op-1")
	f.Add([]byte(`{"id":"x"}`), "", "")
	f.Add([]byte(`{"id":7}`), "bad topic!", "op-1")
	f.Add([]byte(`{"id":7}`), "svc.replies", "")
	f.Add([]byte("\x00"), "..", "\xff")
	f.Add([]byte(`{"id":7}`), strings.Repeat("r", 300), "op")
	f.Fuzz(func(t *testing.T, payload []byte, replyTo, op string) {
		handled := 0
		c := NewCommandConsumerWithResult(func(_ context.Context, cmd *fuzzOrder) (int, error) {
			handled++
			return cmd.ID, nil
		})
		s := c.(*consumerSpec)
		msg := message.NewMessage("uuid", payload)
		msg.Metadata.Set(replyToKey, replyTo)
		msg.Metadata.Set(operationIDKey, op)
		pub := &sentReplies{}
		err := s.handle(msg, fuzzEnv(pub))

		want, ok := decodes[fuzzOrder](payload)
		if wantHandled := map[bool]int{true: 1}[ok]; handled != wantHandled {
			t.Fatalf("payload %q: handler ran %d times, want %d", payload, handled, wantHandled)
		}
		waiting := replyTo != "" && op != ""
		if !waiting {
			if len(pub.msgs) != 0 {
				t.Fatalf("a command without reply topic and operation ID got %d replies", len(pub.msgs))
			}
			if !ok && (err == nil || koto.ClassOf(err) != koto.ClassPoison) {
				t.Fatalf("payload %q does not decode: err %v, want poison", payload, err)
			}
			return
		}
		if topicErr := topics.Validate(replyTo); topicErr != nil {
			if koto.ClassOf(err) != koto.ClassPoison || !strings.Contains(err.Error(), "invalid reply topic") || len(pub.msgs) != 0 {
				t.Fatalf("reply topic %q is invalid: err %v, %d replies; want poison naming the reply topic", replyTo, err, len(pub.msgs))
			}
			return
		}
		if len(pub.msgs) != 1 || pub.topics[0] != replyTo || pub.msgs[0].Metadata.Get(operationIDKey) != op {
			t.Fatalf("request to %q/%q: replies %v; want one on its reply topic with its operation ID", replyTo, op, pub.topics)
		}
		res, rerr := decodeReply[int]("fuzz-order", pub.msgs[0])
		switch {
		case ok && (rerr != nil || res != want.ID):
			t.Fatalf("payload %q: reply (%d, %v), want %d", payload, res, rerr, want.ID)
		case !ok && !errors.Is(rerr, &HandlerError{Kind: KindBadRequest}):
			t.Fatalf("payload %q does not decode: reply error %v, want a %s HandlerError", payload, rerr, KindBadRequest)
		case !ok && (err == nil || koto.ClassOf(err) != koto.ClassPoison):
			t.Fatalf("payload %q does not decode: err %v, want poison", payload, err)
		}
	})
}

// FuzzDecodeReply feeds a requester any reply. A reply flagged as failed
// gives a *HandlerError with a kind (internal when the replier gave none)
// and the replier's message; any other reply gives what its payload
// decodes to, or an error that says the reply did not decode; nothing
// panics.
func FuzzDecodeReply(f *testing.F) {
	f.Add([]byte(`{"id":7}`), "0", "", "")
	f.Add([]byte(``), "0", "", "")
	f.Add([]byte(`{"id":`), "0", "", "")
	f.Add([]byte(`null`), "1", "", "")
	f.Add([]byte(`{}`), "1", "not-found", "no order 7")
	f.Add([]byte("\xff"), "1", "\xff", "\x00")
	f.Add([]byte(`{"id":7}`), "true", "kind", "msg")
	f.Fuzz(func(t *testing.T, payload []byte, hasError, kind, text string) {
		reply := message.NewMessage("r", payload)
		reply.Metadata.Set(requestreply.HasErrorMetadataKey, hasError)
		reply.Metadata.Set(errorKindKey, kind)
		reply.Metadata.Set(requestreply.ErrorMetadataKey, text)
		got, err := decodeReply[fuzzOrder]("fuzz-order", reply)
		if hasError == "1" {
			var herr *HandlerError
			if !errors.As(err, &herr) || herr.Message != text || herr.Kind == "" || (kind != "" && herr.Kind != kind) {
				t.Fatalf("failed reply (kind %q, message %q): err %v; want a HandlerError with them", kind, text, err)
			}
			return
		}
		want, ok := decodes[fuzzOrder](payload)
		switch {
		case len(payload) == 0:
			if err != nil || !reflect.DeepEqual(got, fuzzOrder{}) {
				t.Fatalf("empty reply: (%+v, %v), want the zero result", got, err)
			}
		case ok && (err != nil || !reflect.DeepEqual(&got, want)):
			t.Fatalf("reply %q: (%+v, %v), want %+v", payload, got, err, want)
		case !ok && (err == nil || !strings.Contains(err.Error(), "decoding the reply to fuzz-order")):
			t.Fatalf("reply %q does not decode: err %v, want one naming the reply", payload, err)
		}
	})
}
