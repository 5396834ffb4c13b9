package postgres_test

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
)

// A consumer checks the store before handling a message and marks the
// message after. The example needs PostgreSQL, so it is compiled but not
// run by go test.
func ExampleNewStore() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	// The zero Config: table koto.processed_messages, created on first
	// use; marks count for 24 hours; expired marks deleted every hour.
	store, err := postgres.NewStore(pool, postgres.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	key := "0190f5e2-7a3c-7d4e-9b1a-2c3d4e5f6a7b" // the message's UUID
	done, err := store.IsProcessed(ctx, key)
	if err != nil {
		log.Fatal(err) // an outage: nack and retry later
	}
	if !done {
		fmt.Println("handling the message")
		if err := store.MarkProcessed(ctx, key); err != nil {
			log.Fatal(err)
		}
	}
}

// MarkProcessedTx claims a message in a transaction of the caller's, so
// that the claim commits or rolls back with the handler's writes.
func ExampleStore_MarkProcessedTx() {
	ctx := context.Background()
	pool, store := exampleStore(ctx)
	defer pool.Close()
	defer store.Close()

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit
	claimed, err := store.MarkProcessedTx(ctx, tx, "0190f5e2-7a3c-7d4e-9b1a-2c3d4e5f6a7b")
	if err != nil {
		log.Fatal(err)
	}
	if !claimed {
		return // a duplicate: handled and committed before
	}
	if _, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 10 WHERE id = 1"); err != nil {
		log.Fatal(err) // rolls back the claim with the writes
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}

// Transact begins the transaction and claims the message in one round
// trip, runs the handler with the transaction in its context and commits;
// the idempotency middleware's transactional mode does this for every
// delivery.
func ExampleStore_Transact() {
	ctx := context.Background()
	pool, store := exampleStore(ctx)
	defer pool.Close()
	defer store.Close()

	// The handler writes its effects with the transaction in its context.
	handle := func(ctx context.Context) error {
		tx, _ := postgres.TxFromContext(ctx)
		_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 10 WHERE id = 1")
		return err // an error rolls back the claim with the writes
	}
	claimed, err := store.Transact(ctx, idempotency.Claim{Key: "0190f5e2-7a3c-7d4e-9b1a-2c3d4e5f6a7b"}, handle)
	switch {
	case koto.ClassOf(err) == koto.ClassOutage:
		log.Fatal(err) // the database: nack and retry later
	case err != nil:
		log.Fatal(err) // the handler's own error
	case !claimed:
		fmt.Println("a duplicate: handled and committed before")
	}
}

// With Claim.Defer, BEGIN and the claim go with the handler's first
// statement instead of before the handler, saving their round trip; for a
// duplicate that statement fails with ErrDuplicate and Transact reports
// the duplicate.
func ExampleStore_Transact_deferred() {
	ctx := context.Background()
	pool, store := exampleStore(ctx)
	defer pool.Close()
	defer store.Close()

	claim := idempotency.Claim{
		Key:      "0190f5e2-7a3c-7d4e-9b1a-2c3d4e5f6a7b",
		LockKeys: []string{"account-1"}, // the partition key of what it writes to an outbox
		Defer:    true,
	}
	claimed, err := store.Transact(ctx, claim, func(ctx context.Context) error {
		tx, _ := postgres.TxFromContext(ctx)
		_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - $1 WHERE id = 1", 10)
		return err // ErrDuplicate for a duplicate
	})
	if err != nil {
		log.Fatal(err)
	}
	if !claimed {
		fmt.Println("a duplicate: nothing was written")
	}
}

func ExampleSchemaSQL() {
	fmt.Print(postgres.SchemaSQL(postgres.Config{}))
	// Output:
	// CREATE SCHEMA IF NOT EXISTS koto;
	// CREATE TABLE IF NOT EXISTS koto.processed_messages (
	//     message_id   uuid PRIMARY KEY,
	//     processed_at timestamptz NOT NULL DEFAULT now()
	// );
	// CREATE INDEX IF NOT EXISTS ix_processed_messages_processed_at
	//     ON koto.processed_messages (processed_at);
}

// exampleStore connects to the database and makes a Store with the
// default configuration, as ExampleNewStore shows.
func exampleStore(ctx context.Context) (*pgxpool.Pool, *postgres.Store) {
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	store, err := postgres.NewStore(pool, postgres.Config{})
	if err != nil {
		log.Fatal(err)
	}
	return pool, store
}
