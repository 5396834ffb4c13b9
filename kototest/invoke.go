package kototest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/internal/pgtx"
	"github.com/koto-dev/watermill-koto/topics"
)

// InvokeOption changes the message that [Invoke] delivers.
type InvokeOption func(*invocation)

type invocation struct {
	ctx  context.Context
	msg  *message.Message
	pub  message.Publisher
	corr string
}

// InContext delivers the message with ctx: one from [InTx] puts the
// handler in that transaction.
func InContext(ctx context.Context) InvokeOption {
	return func(i *invocation) { i.ctx = ctx }
}

// WithCorrelationID gives the message a correlation ID, which the
// handler's context carries.
func WithCorrelationID(id string) InvokeOption {
	return func(i *invocation) { i.corr = id }
}

// WithMetadata sets a metadata entry of the message.
func WithMetadata(key, value string) InvokeOption {
	return func(i *invocation) { i.msg.Metadata.Set(key, value) }
}

// WithReplies publishes a command's reply to a Request with pub.
func WithReplies(pub message.Publisher) InvokeOption {
	return func(i *invocation) { i.pub = pub }
}

// Invoke calls consumer's function with payload, encoded as its message
// is (JSON, with the type name of payload's type), as a Service calls it
// once the message has passed its middleware (cqrs.Invoke): no broker, no
// idempotency, retries or dead letters. It returns the function's error,
// or the error of a payload the consumer cannot take.
func Invoke(t testing.TB, consumer cqrs.Consumer, payload any, opts ...InvokeOption) error {
	t.Helper()
	data, err := json.Marshal(payload)
	if err != nil {
		t.Fatalf("kototest: encoding %T: %v", payload, err)
	}
	msg := message.NewMessage(watermill.NewUUID(), data)
	msg.Metadata.Set(koto.TypeNameMetadataKey, topics.TypeName(payload))
	inv := &invocation{ctx: context.Background(), msg: msg}
	for _, opt := range opts {
		opt(inv)
	}
	ctx := inv.ctx
	if inv.corr != "" {
		ctx = correlation.WithID(ctx, inv.corr)
		msg.Metadata.Set(correlation.MetadataKey, inv.corr)
	}
	msg.SetContext(ctx)
	return cqrs.Invoke(consumer, msg, inv.pub, nil)
}

// InTx begins a transaction on pool and returns a context carrying it, as
// a transactional consumer's handler gets it (postgres.TxFromContext
// finds it, and the outbox's publishers write into it). The transaction
// is rolled back when the test ends; read what the handler wrote through
// it before.
func InTx(t testing.TB, pool *pgxpool.Pool) context.Context {
	t.Helper()
	tx, err := pool.Begin(context.Background())
	if err != nil {
		t.Fatalf("kototest: begin: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	ctx, _ := pgtx.Bind(context.Background(), tx)
	return ctx
}
