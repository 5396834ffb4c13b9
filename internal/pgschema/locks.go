package pgschema

import (
	"context"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
)

// Advisory locks are taken with two int4 keys, (class, object); PostgreSQL
// keeps that key space apart from single-bigint advisory locks, which
// applications use. The class says what is locked, the object is a hash of
// the quoted schema or schema.table, so that different tables never wait
// for each other.
const (
	ClassSchema    int32 = 0x6b6f7401 // creating a schema
	ClassTable     int32 = 0x6b6f7402 // creating a table and its indexes
	ClassCleanup   int32 = 0x6b6f7403 // cleaning a table
	ClassForwarder int32 = 0x6b6f7404 // forwarding an outbox table: one active forwarder
)

// LockObject hashes a quoted name into the object half of a lock key.
func LockObject(name string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int32(h.Sum32())
}

// XactLock takes the transaction-scoped advisory lock (class, name),
// waiting for it.
func XactLock(ctx context.Context, tx pgx.Tx, class int32, name string) error {
	_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::int4, $2::int4)", class, LockObject(name))
	return err
}
