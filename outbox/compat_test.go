package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
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
	topic := kototest.Topic(t, "compat")
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
	case <-kototest.Context(t).Done():
		t.Fatal("Watermill's forwarder delivered nothing")
	}
}

// TestForwarderReadsWhatWatermillSQLReads: rows written by watermill-sql's
// own publisher, in transactions whose IDs are not in commit order, are
// the rows watermill-sql's own subscriber reads, and the Forwarder sends
// them to Kafka in the order of their transaction IDs. The Forwarder reads
// the table with a query of its own, in watermill-sql's format: a change
// of watermill-sql's row format, or a drift of the Forwarder's query, fails
// here. (Watermill's forwarder hands messages on through a router, which
// may swap neighbours, so its order is compared as a set.)
func TestForwarderReadsWhatWatermillSQLReads(t *testing.T) {
	e := newEnv(t)
	topic := kototest.Topic(t, "drift")
	kototest.Provision(t, broker.Config{Brokers: e.brokers, Provision: broker.ProvisionConfig{Partitions: 1}}, topic)
	want := writeInterleaved(t, e, topic)

	byWatermill := watermillOrder(t, e, topic, len(want))
	if !slices.Equal(slices.Sorted(slices.Values(byWatermill)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("watermill-sql's subscriber read %v, want %v", byWatermill, want)
	}
	e.startForwarder(e.forwarderConfig())
	var byForwarder []string
	for _, rec := range newReader(t, e.brokers, topic).next(len(want)) {
		byForwarder = append(byForwarder, rec.Payload)
	}
	if !slices.Equal(byForwarder, want) {
		t.Fatalf("the Forwarder sent %v, want %v (transaction ID order)", byForwarder, want)
	}
}

// writeInterleaved writes messages with watermill-sql's publisher: a
// transaction that gets its ID first and commits last, one that commits in
// between, then plain ones. It returns their payloads in the order of the
// transaction IDs, the order both readers must keep.
func writeInterleaved(t *testing.T, e *env, topic string) []string {
	t.Helper()
	ctx := kototest.Context(t)
	write := func(tx pgx.Tx, payloads ...string) {
		for _, p := range payloads {
			msg := message.NewMessage(watermill.NewUUID(), []byte(p))
			msg.Metadata.Set(koto.PartitionKeyMetadataKey, "k")
			if err := watermillPublisher(t, e, tx).Publish(topic, msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	first, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(first, "first-1")
	second, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(second, "second-1", "second-2")
	if err := second.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	write(first, "first-2")
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"first-1", "first-2", "second-1", "second-2"}
	for i := range 20 {
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p := fmt.Sprintf("plain-%02d", i)
		write(tx, p)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		want = append(want, p)
	}
	return want
}

// watermillOrder reads n messages with Watermill's forwarder on a
// watermill-sql subscriber and returns their payloads in the order read.
func watermillOrder(t *testing.T, e *env, topic string, n int) []string {
	t.Helper()
	sub, err := wsql.NewSubscriber(wsql.BeginnerFromPgx(e.pool), wsql.SubscriberConfig{
		ConsumerGroup:  "watermill",
		SchemaAdapter:  watermillSchema(e.o.Table()),
		OffsetsAdapter: wsql.DefaultPostgreSQLOffsetsAdapter{GenerateMessagesOffsetsTableName: func(string) string { return e.schema + ".outbox_offsets" }},
		PollInterval:   10 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: int64(n)}, nil)
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
	var got []string
	for len(got) < n {
		select {
		case msg := <-received:
			msg.Ack()
			got = append(got, string(msg.Payload))
		case <-kototest.Context(t).Done():
			t.Fatalf("watermill-sql's subscriber read %d of %d messages: %v", len(got), n, got)
		}
	}
	return got
}

var (
	_ = (*pgxpool.Pool)(nil)
	_ = outbox.New
)
