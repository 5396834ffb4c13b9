// Package postgres is the durable idempotency store: processed message keys
// kept in a PostgreSQL table, so that deduplication survives restarts and
// redeploys.
//
// In the library's layers (README, Architecture) it is a part that talks
// to PostgreSQL: it marks its connection and server errors as outages
// itself, and imports no Kafka client.
//
// # Table
//
// A [Store] keeps each key as idempotency.KeyUUID(key) in one table,
// koto.processed_messages by default. It creates the schema, table and index
// on first use, under PostgreSQL advisory locks so that instances starting
// together do not race; a failed creation is tried again on the next call.
// With Config.DisableAutoCreateSchema it only checks that the table exists
// and [SchemaSQL] gives the DDL for your migrations. Names are validated and
// quoted: a schema or table name can never inject SQL.
//
// # Window and cleanup
//
// [Store.IsProcessed] counts only marks younger than the window, in SQL,
// whatever the cleanup has deleted. A background cleanup deletes expired
// marks every CleanupInterval in bounded batches, each its own short
// transaction, one instance at a time ([Store.Cleanup]).
//
// # Asynchronous marks
//
// [Store.MarkProcessed] commits with synchronous_commit off for its own
// transaction only (the session's setting is left alone): the mark is
// visible at once, but its commit does not wait for the WAL flush, which
// saves a disk sync per message. A crash of PostgreSQL within the next
// moments (at most three times wal_writer_delay, 600 ms by default) can
// lose it; a redelivery of the message then runs its handler again. That is
// the at-least-once window check-handle-mark has anyway between handler and
// mark. The transactional claim keeps the durability settings of its
// transaction.
//
// # Concurrent callers share statements
//
// [Store.IsProcessed] and [Store.MarkProcessed] each keep at most half of
// the pool's connections (at least one) busy with their statements: below
// that a call sends its own single-key statement at once, as raw pgx
// would; the calls that arrive while that many are in flight, which would
// otherwise queue for a connection, wait for one to end and then go
// together, as one statement for all their keys (= ANY of an array for
// checks, INSERT of unnest for marks, the keys distinct and in order, so
// that marks lock rows in the same order everywhere). Many concurrent
// callers thus send far fewer statements, which matters most where
// PostgreSQL's CPU is the limit, while a consumer with fewer handlers than
// connections sends what it sent before. Each call still returns only
// when its own statement has finished, so a mark is in the table
// (committed as the previous section says) before MarkProcessed returns,
// and a failed statement fails every call in it, for each caller to retry
// as before. No goroutine runs for this: the first caller of a statement
// sends it and, once it ends, hands that role to the next caller waiting.
// A statement runs to the latest deadline of its callers: one caller
// giving up does not fail the others; a caller whose context ends before
// its statement is sent returns at once.
//
// # Transactional claim
//
// For handlers whose side effects live in the same database, the claim of a
// key runs inside the transaction that holds those effects: it inserts the
// mark, or renews one older than the window, and reports whether it did.
// It commits or rolls back with the effects. A concurrent claim of the same
// key waits on the row until the first transaction ends: after a commit it
// finds the mark (a duplicate), after a rollback it claims.
//
// [Store.Transact] runs a handler in such a transaction on the store's
// pool, BEGIN, the key locks of idempotency.Claim.LockKeys and the claim in
// one round trip, and the handler finds it with [TxFromContext]. With
// Claim.Defer they go with the handler's first statement instead (or with
// the COMMIT when it wrote nothing), saving that round trip: when the claim
// finds a fresh mark, that statement fails with [ErrDuplicate] and the
// transaction is rolled back. A first statement that cannot join the batch
// (one without arguments, a Query, a batch of the caller's, a COPY) runs
// after the claim instead. [Store.MarkProcessedTx] claims in a transaction
// of the caller's.
//
// # Batches
//
// A batch handler claims many keys at once. [Store.TransactBatch] begins a
// transaction that takes the lock keys and claims every key of the batch
// in one statement (an INSERT of unnest, the keys in ascending order, so
// that two batches claiming some of the same keys lock them in the same
// order), reports which it claimed, and commits when its function returns
// nil; a concurrent claim of one of its keys waits as above. A
// serialization failure or a deadlock in the function's statements is an
// outage there, so that the batch runs again as it is.
// [Store.ProcessedKeys] and [Store.MarkProcessedKeys] check and mark many
// keys with one statement each.
//
// # Errors
//
// Errors from PostgreSQL are returned wrapped with
// idempotency.ErrStoreUnavailable (and the pgx error) and marked
// koto.Outage, for the caller to retry. A Store never panics on them and
// works again once the database is back.
package postgres
