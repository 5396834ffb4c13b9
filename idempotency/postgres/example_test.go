package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

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

// In the transactional mode the claim commits with the handler's writes.
func ExampleStore_MarkProcessedTx() {
	ctx := context.Background()
	pool, store := exampleStore(ctx)
	defer pool.Close()
	defer store.Close()

	// The handler writes its effects with the transaction in its context.
	handle := func(ctx context.Context) error {
		tx, _ := postgres.TxFromContext(ctx)
		_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 10 WHERE id = 1")
		return err
	}

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
	if err := handle(postgres.ContextWithTx(ctx, tx)); err != nil {
		log.Fatal(err) // rolls back the claim with the writes
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}

// BeginClaim begins the transaction and claims the message in one round
// trip; middleware.TransactionalIdempotency does this for every delivery.
func ExampleStore_BeginClaim() {
	ctx := context.Background()
	pool, store := exampleStore(ctx)
	defer pool.Close()
	defer store.Close()

	tx, claimed, err := store.BeginClaim(ctx, "0190f5e2-7a3c-7d4e-9b1a-2c3d4e5f6a7b")
	if err != nil {
		log.Fatal(err) // an outage: nack and retry later
	}
	if !claimed {
		return // a duplicate: nothing is left open
	}
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit
	if _, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 10 WHERE id = 1"); err != nil {
		log.Fatal(err) // rolls back the claim with the writes
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}

// DeferClaim saves BEGIN and the claim their round trip: they go with the
// transaction's first statement, which fails with ErrDuplicate when the
// message was processed already; middleware.TransactionalIdempotency does
// this for every delivery.
func ExampleStore_DeferClaim() {
	ctx := context.Background()
	pool, store := exampleStore(ctx)
	defer pool.Close()
	defer store.Close()

	tx := store.DeferClaim("0190f5e2-7a3c-7d4e-9b1a-2c3d4e5f6a7b", nil)
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit
	_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - $1 WHERE id = 1", 10)
	switch {
	case errors.Is(err, postgres.ErrDuplicate):
		return // a duplicate: nothing was written, nothing is left open
	case err != nil:
		if _, _, claimErr := tx.Outcome(); claimErr != nil {
			log.Fatal(claimErr) // an outage: nack and retry later
		}
		log.Fatal(err) // rolls back the claim with the writes
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
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
