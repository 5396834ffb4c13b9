// Package postgres is the durable idempotency store: processed message keys
// kept in a PostgreSQL table, so that deduplication survives restarts and
// redeploys.
//
// A Store marks keys (stored as idempotency.KeyUUID(key)) in one table,
// koto.processed_messages by default, which it creates on first use under a
// PostgreSQL advisory lock unless Config.DisableAutoCreateSchema is set; then
// it only checks that the table exists, and SchemaSQL gives the DDL for your
// migrations. IsProcessed counts only marks younger than the window, in
// SQL. A background cleanup deletes expired marks every CleanupInterval, in
// bounded batches, one instance at a time. MarkProcessed commits its mark
// without waiting for the WAL flush, for its own statement only: a crash of
// PostgreSQL can lose the last marks, whose redeliveries then run again, as
// after a crash between the handler and the mark (at least once).
//
// For handlers whose side effects live in the same database,
// MarkProcessedTx claims a key inside the handler's own transaction: the
// claim commits or rolls back with the handler's writes, and a concurrent
// duplicate waits for the outcome. ContextWithTx and TxFromContext carry
// that transaction to the handler.
//
// Errors from PostgreSQL are returned wrapped with
// idempotency.ErrStoreUnavailable (and the pgx error): an outage, for the
// caller to retry. A Store never panics on them and works again once the
// database is back.
package postgres
