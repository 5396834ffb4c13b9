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
	ClassKey       int32 = 0x6b6f7405 // a partition key, by [LockKeysSQL]
	ClassParked    int32 = 0x6b6f7406 // a queue of parked messages: a consumer group's partition key
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

// LockKeysSQL takes the transaction-scoped advisory lock (ClassKey,
// hashtext(key)) of each distinct key hash ($1, text[]), in ascending
// order so that two transactions locking overlapping keys cannot
// deadlock, and only while the transaction has no xid yet: it returns how
// many locks it took, none when the transaction had written. Two keys of
// one hash share a lock, which orders them more than needed and no less.
// Every outbox table and the transactional idempotency mode lock keys
// through it, so that one key's transactions are ordered whichever of
// them takes the lock. 1802466309 is ClassKey: PostgreSQL 15 reads no
// hexadecimal literal.
const LockKeysSQL = `SELECT count(pg_advisory_xact_lock(1802466309, h)) FROM (
	SELECT DISTINCT hashtext(k) AS h FROM unnest($1::text[]) AS k ORDER BY h
) AS keys WHERE pg_current_xact_id_if_assigned() IS NULL`

// NonEmpty returns keys without the empty ones.
func NonEmpty(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if k != "" {
			out = append(out, k)
		}
	}
	return out
}
