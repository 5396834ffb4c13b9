// Package middleware gives a Watermill router Koto's consumer semantics:
// correlation IDs that follow the work ([Correlation]), duplicates skipped
// with a store that may survive restarts ([Idempotency]) or, for handlers
// whose effects live in PostgreSQL, in the transaction that holds those
// effects ([TransactionalIdempotency]), poison messages
// sent to a dead-letter topic instead of blocking the partition while
// outages are waited out ([DeadLetter]), and one structured log line per
// message ([Logging]).
//
// # Order
//
// Use [Defaults]: it builds the chain in the one order that works,
// outermost first:
//
//	Correlation → Logging → DeadLetter → Idempotency → handler
//
// where Idempotency is [TransactionalIdempotency] when Config.Transactional
// is set. [Defaults] explains why. DeadLetter does the work of Watermill's Retry and
// PoisonQueue together, so their relative order cannot be got wrong; do not
// add those two, nor Watermill's Deduplicator (it records a message before
// the handler runs, so a failed message's redelivery is dropped: a lost
// message).
//
// # Exactly-once effects
//
// [Idempotency] checks, runs the handler, then marks: delivery is
// at-least-once, and a crash between the handler and the mark runs the
// handler again on redelivery. [TransactionalIdempotency] closes that gap
// for handlers that write to PostgreSQL: it claims the message
// (postgres.Store.MarkProcessedTx's statement) in a transaction, runs the
// handler with that transaction in its context (postgres.TxFromContext),
// and commits the claim with the handler's writes, or rolls both back.
//
// # Correlation
//
// [Correlation] puts the ID in the message context, where everything reads
// it: [Logging] for its line; loggers built on [NewLogHandler] for the
// handler's own records (logger.InfoContext(msg.Context(), ...)); this
// project's cqrs publishers for the messages a handler publishes; and
// [DeadLetter] for the dead letter. Correlation itself stamps the messages
// the handler returns.
//
// # Errors
//
// DeadLetter sorts handler errors with [Classify] into three classes.
// Poison ([Permanent] errors and panics) is dead-lettered at once. A
// handler that decodes its payload should wrap the decode error with
// [Permanent] (this project's cqrs consumers do): a bare JSON error is not
// poison, since it may as well come from a dependency's error page. Outages
// ([Transient] errors, store errors, unreachable networks, databases and
// Kafka brokers, partitions without a leader or enough in-sync replicas,
// dependency timeouts) are retried with backoff until they succeed and
// never dead-lettered. Anything else is retried a bounded number of times,
// then dead-lettered.
//
// # Outcomes
//
// Every delivery ends in one [Outcome], the "outcome" field of the log
// line: ok, duplicate, dead-lettered or nacked; each scheduled retry logs a
// line with outcome retry. Logging puts a small record in the message
// context that the inner middlewares fill; it is guarded by a mutex.
//
// # Conventions
//
// The router handler's name is the consumer group (topics.ConsumerGroup).
// So the default dead-letter topic is topics.DeadLetter(handler name) and
// the default idempotency scope is the handler name.
package middleware
