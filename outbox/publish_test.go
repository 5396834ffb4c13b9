package outbox_test

import (
	"context"
	"errors"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestCommittedAndRolledBack: a rolled-back transaction's messages never
// reach Kafka, not even after twice the poll interval; a committed one's
// arrive once each, with their UUID, metadata, correlation ID and partition
// key.
func TestCommittedAndRolledBack(t *testing.T) {
	e := newEnv(t)
	topic := kototest.Topic(t, "orders")
	r := newReader(t, e.brokers, topic)
	e.startForwarder(e.forwarderConfig())

	errRollback := errors.New("rolled back on purpose")
	err := e.o.Transact(kototest.Context(t), func(ctx context.Context, tx pgx.Tx) error {
		if err := e.o.Publisher(tx).Publish(topic, newMsg("rolled-back", "k")); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Transact = %v, want the function's error", err)
	}
	r.none(2 * testPoll)

	a, b := newMsg("a", "order-1"), newMsg("b", "")
	a.Metadata.Set("name", "order-placed")
	b.SetContext(correlation.WithID(context.Background(), "corr-b"))
	e.publish(topic, a, b)

	got := r.next(2)
	byUUID := map[string]record{}
	for _, rec := range got {
		byUUID[rec.UUID] = rec
	}
	ra, rb := byUUID[a.UUID], byUUID[b.UUID]
	if ra.Payload != "a" || ra.Key != "order-1" || ra.Headers["name"] != "order-placed" ||
		ra.Headers[koto.PartitionKeyMetadataKey] != "order-1" {
		t.Errorf("record of a = %+v", ra)
	}
	if rb.Payload != "b" || rb.Key != "" || rb.Headers[correlation.MetadataKey] != "corr-b" {
		t.Errorf("record of b = %+v", rb)
	}
	if b.Metadata.Get(correlation.MetadataKey) != "corr-b" {
		t.Errorf("the correlation ID was not set on the published message")
	}
	r.none(2 * testPoll)
	kototest.WaitFor(t, "an empty table", func() bool { return e.rows() == 0 })
}
