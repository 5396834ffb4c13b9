package outbox_test

import (
	"context"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/internal/kafkatest"
	"github.com/koto-dev/watermill-koto/outbox"
)

// forwarderTopic is the watermill-sql topic under which Watermill's
// components see the outbox table; the adapters below map every topic to
// the table.
const forwarderTopic = "outbox"

func watermillSchema(table string) wsql.DefaultPostgreSQLSchema {
	return wsql.DefaultPostgreSQLSchema{GenerateMessagesTableName: func(string) string { return table }}
}

// watermillPublisher is Watermill's components/forwarder publisher on a
// watermill-sql publisher writing into the outbox table in tx.
func watermillPublisher(t *testing.T, e *env, tx pgx.Tx) message.Publisher {
	t.Helper()
	pub, err := wsql.NewPublisher(wsql.TxFromPgx(tx), wsql.PublisherConfig{SchemaAdapter: watermillSchema(e.o.Table())}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return forwarder.NewPublisher(pub, forwarder.PublisherConfig{ForwarderTopic: forwarderTopic})
}

// TestWatermillForwarderReadsTheTable: the table is in the format of
// watermill-sql and Watermill's forwarder, so Watermill's own forwarder
// on a watermill-sql subscriber forwards what an outbox Publisher wrote,
// with its UUID, payload and metadata.
func TestWatermillForwarderReadsTheTable(t *testing.T) {
	e := newEnv(t)
	topic := kafkatest.Topic(t, "compat")
	msg := newMsg("hello", "k")
	msg.Metadata.Set("name", "greeting")
	e.publish(topic, msg)

	sub, err := wsql.NewSubscriber(wsql.BeginnerFromPgx(e.pool), wsql.SubscriberConfig{
		ConsumerGroup:  "watermill",
		SchemaAdapter:  watermillSchema(e.o.Table()),
		OffsetsAdapter: wsql.DefaultPostgreSQLOffsetsAdapter{GenerateMessagesOffsetsTableName: func(string) string { return e.schema + ".outbox_offsets" }},
		PollInterval:   10 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 1}, nil)
	defer out.Close()
	received, err := out.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := forwarder.NewForwarder(sub, out, nil, forwarder.Config{ForwarderTopic: forwarderTopic})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fwd.Run(context.Background()) }()
	defer func() {
		_ = fwd.Close()
		<-done
		_ = sub.Close()
	}()
	select {
	case got := <-received:
		got.Ack()
		if got.UUID != msg.UUID || string(got.Payload) != "hello" || got.Metadata.Get("name") != "greeting" {
			t.Fatalf("Watermill's forwarder delivered %s %q %v", got.UUID, got.Payload, got.Metadata)
		}
	case <-kafkatest.Context(t).Done():
		t.Fatal("Watermill's forwarder delivered nothing")
	}
}

var (
	_ = (*pgxpool.Pool)(nil)
	_ = outbox.New
)
