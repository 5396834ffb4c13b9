package outbox_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
)

// TestContextPublisher: a message reaches the outbox through the
// transaction in its context, whether the outbox's Transact or the
// idempotency store's (a transactional handler's) put it there; a message
// without one is refused and nothing of its call is written.
func TestContextPublisher(t *testing.T) {
	e := newEnv(t)
	topic := kototest.Topic(t, "ctx")
	pub := e.o.ContextPublisher()

	err := e.o.Transact(kototest.Context(t), func(ctx context.Context, tx pgx.Tx) error {
		in := newMsg("transact", "")
		in.SetContext(ctx)
		return pub.Publish(topic, in)
	})
	if err != nil {
		t.Fatal(err)
	}

	claimed, err := newStore(t, e).Transact(kototest.Context(t), idempotency.Claim{Key: "ctx/1"}, func(ctx context.Context) error {
		viaStore := newMsg("store", "")
		viaStore.SetContext(ctx)
		orphan := newMsg("orphan", "")
		if err := pub.Publish(topic, viaStore, orphan); !errors.Is(err, outbox.ErrNoTransaction) {
			t.Errorf("Publish with a message without transaction = %v, want ErrNoTransaction", err)
		}
		return pub.Publish(topic, viaStore)
	})
	if err != nil || !claimed {
		t.Fatalf("Store.Transact = %v, %v", claimed, err)
	}
	if n := e.rows(); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
}

// TestAfterCommit: functions registered with AfterCommit run after the
// commit of the outbox's Transact or of the idempotency store's, in order,
// and never after a rollback; a context without a transaction refuses
// them.
func TestAfterCommit(t *testing.T) {
	e := newEnv(t)
	store := newStore(t, e)
	transacts := map[string]func(fn func(ctx context.Context) error) error{
		"Outbox.Transact": func(fn func(ctx context.Context) error) error {
			return e.o.Transact(kototest.Context(t), func(ctx context.Context, _ pgx.Tx) error { return fn(ctx) })
		},
		"Store.Transact": func(fn func(ctx context.Context) error) error {
			_, err := store.Transact(kototest.Context(t), idempotency.Claim{Key: newMsg("", "").UUID}, fn)
			return err
		},
	}
	for name, transact := range transacts {
		var ran []int
		err := transact(func(ctx context.Context) error {
			for i := range 3 {
				if err := outbox.AfterCommit(ctx, func() { ran = append(ran, i) }); err != nil {
					return err
				}
			}
			if len(ran) != 0 {
				t.Errorf("%s: ran before the commit", name)
			}
			return nil
		})
		if err != nil || !slices.Equal(ran, []int{0, 1, 2}) {
			t.Fatalf("%s: after commit: %v, ran %v", name, err, ran)
		}
		ran = nil
		_ = transact(func(ctx context.Context) error {
			_ = outbox.AfterCommit(ctx, func() { ran = append(ran, 1) })
			return errors.New("rollback")
		})
		if len(ran) != 0 {
			t.Fatalf("%s: ran after a rollback", name)
		}
	}
	if err := outbox.AfterCommit(context.Background(), func() {}); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("AfterCommit without a transaction = %v", err)
	}
}

// TestTransactCommitFails: when the commit itself fails (here a deferred
// constraint), Transact returns the error, the messages written in the
// transaction are gone with it and no AfterCommit function runs.
func TestTransactCommitFails(t *testing.T) {
	e := newEnv(t)
	topic := kototest.Topic(t, "commit")
	table := pgx.Identifier{e.schema, "once"}.Sanitize()
	pgtest.Exec(t, e.pool, "CREATE TABLE "+table+" (id int UNIQUE DEFERRABLE INITIALLY DEFERRED)")
	ran := false
	err := e.o.Transact(kototest.Context(t), func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1), (1)"); err != nil {
			return err
		}
		if err := outbox.AfterCommit(ctx, func() { ran = true }); err != nil {
			return err
		}
		in := newMsg("x", "")
		in.SetContext(ctx)
		return e.o.ContextPublisher().Publish(topic, in)
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("Transact = %v, want the commit's unique_violation", err)
	}
	if ran {
		t.Fatal("an AfterCommit function ran after a failed commit")
	}
	if n := e.rows(); n != 0 {
		t.Fatalf("%d rows after a failed commit, want 0", n)
	}
}

// TestTransactPanics: a panic rolls back and goes on.
func TestTransactPanics(t *testing.T) {
	e := newEnv(t)
	topic := kototest.Topic(t, "panic")
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not go on")
			}
		}()
		_ = e.o.Transact(kototest.Context(t), func(ctx context.Context, tx pgx.Tx) error {
			if err := e.o.Publisher(tx).Publish(topic, newMsg("x", "")); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	if n := e.rows(); n != 0 {
		t.Fatalf("%d rows after a panic, want 0", n)
	}
}

// TestInvalidMessages: what Kafka would refuse is refused when written,
// as poison, since no retry can change it, and nothing of the call is
// written.
func TestInvalidMessages(t *testing.T) {
	e := newEnv(t)
	small, err := outbox.New(e.pool, outbox.Config{Schema: e.schema, MaxMessageBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	badMeta := newMsg("x", "")
	badMeta.Metadata.Set("k", "\xff")
	for name, c := range map[string]struct {
		o     *outbox.Outbox
		topic string
		msgs  []*message.Message
	}{
		"bad topic":     {e.o, "orders/placed", []*message.Message{newMsg("x", "")}},
		"too large":     {small, "orders", []*message.Message{newMsg("ok", ""), newMsg(string(make([]byte, 100)), "")}},
		"bad metadata":  {e.o, "orders", []*message.Message{newMsg("ok", ""), badMeta}},
		"empty topic":   {e.o, "", []*message.Message{newMsg("x", "")}},
		"too long name": {e.o, string(make([]byte, 250)), []*message.Message{newMsg("x", "")}},
	} {
		err := e.o.Transact(kototest.Context(t), func(ctx context.Context, tx pgx.Tx) error {
			return c.o.Publisher(tx).Publish(c.topic, c.msgs...)
		})
		if !errors.Is(err, outbox.ErrInvalidMessage) || koto.ClassOf(err) != koto.ClassPoison {
			t.Errorf("%s: %v (class %v), want ErrInvalidMessage, poison", name, err, koto.ClassOf(err))
		}
	}
	if n := e.rows(); n != 0 {
		t.Fatalf("%d rows written", n)
	}
}

// TestPublishAssignsUUID: a message without UUID gets a UUIDv7.
func TestPublishAssignsUUID(t *testing.T) {
	e := newEnv(t)
	msg := message.NewMessage("", []byte("x"))
	e.publish(kototest.Topic(t, "uuid"), msg)
	if len(msg.UUID) != 36 || msg.UUID[14] != '7' {
		t.Fatalf("UUID %q, want a UUIDv7", msg.UUID)
	}
}

// TestAutoTxPublisher: the messages of a call that have no transaction are
// written together in one of their own, committed at once; those that
// have one go into it, and roll back with it.
func TestAutoTxPublisher(t *testing.T) {
	e := newEnv(t)
	topic := kototest.Topic(t, "auto")
	pub := e.o.AutoTxPublisher()
	errRollback := errors.New("rollback")
	err := e.o.Transact(kototest.Context(t), func(ctx context.Context, tx pgx.Tx) error {
		inTx := newMsg("in-tx", "")
		inTx.SetContext(ctx)
		if err := pub.Publish(topic, newMsg("own-1", ""), inTx, newMsg("own-2", "")); err != nil {
			return err
		}
		if n := e.rows(); n != 2 {
			t.Errorf("%d rows committed outside the open transaction, want the 2 without one", n)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if n := e.rows(); n != 2 {
		t.Fatalf("%d rows after the rollback, want 2", n)
	}
	var txs int
	if err := e.pool.QueryRow(kototest.Context(t), "SELECT count(DISTINCT transaction_id) FROM "+e.o.Table()).Scan(&txs); err != nil || txs != 1 {
		t.Fatalf("the messages without a transaction were written in %d transactions (%v), want 1", txs, err)
	}
	if err := pub.Publish("bad/topic", newMsg("x", "")); !errors.Is(err, outbox.ErrInvalidMessage) {
		t.Fatalf("an invalid topic through AutoTxPublisher = %v, want ErrInvalidMessage", err)
	}
}
