// Package middleware gives a Watermill router reliable consumer semantics:
// correlation IDs that follow the work ([Correlation]), duplicates skipped
// with a store that may survive restarts ([Idempotency]) or, for handlers
// whose effects live in PostgreSQL, in the transaction that holds those
// effects ([TransactionalIdempotency]), poison messages sent to a
// dead-letter topic instead of blocking the partition while outages are
// waited out ([DeadLetter]), and one structured log line per message
// ([Logging]).
//
// # Order
//
// Use [Defaults]: it builds the chain in the one order that works,
// outermost first:
//
//	Correlation → Telemetry → Logging → DeadLetter → Idempotency → handler
//
// Correlation comes first so that everything inside, the log line and the
// consumer span included, sees the correlation ID. Telemetry (the
// Middleware of telemetry.Telemetry) comes next, so that its consumer span
// covers the whole delivery and is in the context of everything inside:
// the log lines, the dead letter's producer span, the messages the handler
// publishes. Logging wraps the rest so that it times the whole delivery
// and decides its final outcome, which it logs and reports to
// Telemetry's span and metrics. DeadLetter wraps Idempotency so
// that a store outage reaches it as an outage (retried, never
// dead-lettered) and so that a dead-lettered message is never marked
// processed: replaying it from the dead-letter topic, with the same UUID,
// runs the handler again. Idempotency is innermost so that only a handler
// that succeeded is marked and each retry checks again; in the
// transactional mode, so that each retry is a transaction of its own, whose
// claim rolls back with the failed attempt.
//
// DeadLetter does the work of Watermill's Retry and PoisonQueue together;
// do not add those two, nor Watermill's Deduplicator: it records a message
// before the handler runs, so a failed message's redelivery is dropped, a
// lost message.
//
// The chain owns goroutines (the marks after an ack, below): close the
// router, then the [Chain], then the store.
//
// # Check, handle, mark
//
// [Idempotency] skips a message whose scoped key (see [IdempotencyConfig])
// the store has: it is acked without calling the handler, with outcome
// duplicate. Otherwise the handler runs, and only when it succeeds is the
// key marked: a failing handler marks nothing, so its retry or redelivery
// runs it again. Delivery stays at-least-once: a crash between the handler
// and the mark redelivers the message and runs the handler again. A mark
// that fails is retried in place with MarkBackoff, so an outage of the
// store does not run the handler twice.
//
// When the handler returns messages, the router publishes them after the
// chain has returned, and acks the message only if that publish succeeds.
// So such a message is marked not when the handler returns but once it is
// acked, by a goroutine of the [IdempotentConsumer] that waits for the ack
// (at most MarkAfterAckTimeout) and then marks, retrying for at most
// MarkAfterAckTimeout more: a failed publish marks nothing and the
// redelivery returns the messages again. A delivery of the same key that
// arrives meanwhile waits for that mark and is then a duplicate; after
// StoreTimeout it fails as an outage ([ErrMarkPending]) rather than run the
// handler a second time. A mark given up there is logged at warn; only a
// later duplicate of that message would run the handler again.
// [IdempotentConsumer.Close] waits for these goroutines.
//
// # Exactly-once effects
//
// [TransactionalIdempotency] closes the crash window for handlers that
// write to PostgreSQL. Per delivery, its store begins a transaction and
// claims the key in it; the handler runs with that transaction in its
// context (postgres.TxFromContext) and its writes commit with the claim,
// or roll back with it when it fails or panics. A key with a fresh mark is
// a duplicate: the transaction ends and the message is acked, with
// OnDuplicate called. A concurrent delivery of the same key (a redelivery
// during a rebalance, two instances) waits on the claim until the first
// transaction ends: after a commit it is a duplicate, after a rollback it
// runs. Size the pool for one connection per message handled at once (one
// per partition), plus the store's own use.
//
// By default BEGIN and the claim take a round trip of their own before the
// handler runs, so a duplicate never reaches the handler. With
// IdempotencyConfig.DeferClaim they go to PostgreSQL with the handler's
// first statement instead (a postgres.ClaimTx), or with the COMMIT when
// the handler wrote nothing, so a handler that writes one row costs two
// round trips (its statement, the commit) instead of three. The handler
// then starts before the claim is decided: on a duplicate its first
// statement fails with postgres.ErrDuplicate, everything it did in the
// transaction rolls back, and whatever it returns the message is acked as
// a duplicate. The effects in the transaction still commit once, but code
// of the handler before its first statement (an HTTP call, an email) runs
// for every redelivery of a processed message, not only for retries, so
// DeferClaim suits handlers whose work before their first statement is
// free of outside effects.
//
// A failed begin, claim or commit is an outage, and so is a handler error
// once the transaction's connection broke; a commit whose outcome is
// unknown too, since the redelivery finds the claim if it happened. A
// commit that PostgreSQL turns into a rollback, because a statement of the
// handler failed and the handler returned nil all the same, is an ordinary
// retryable error.
//
// # Outgoing messages in the transaction
//
// A message the handler publishes straight to Kafka is out before the
// commit: if the commit then fails, it announces effects that never
// happened. Give the mode the transactional outbox of the same database
// (IdempotencyConfig.Outbox, an *outbox.Outbox) and the messages commit
// with the effects instead. The transaction is then bound to the outbox,
// so in the handler the outbox's ContextPublisher (and the cqrs publishers
// built on it), outbox.AfterCommit and outbox.PublishDomainEvents write
// and register in it; the middleware runs the after-commit work once the
// commit succeeded. The messages the handler returns are written into the
// outbox in the transaction, for the router handler's publish topic and
// with the correlation ID, and the router publishes nothing itself (its
// publisher is not used). Without an outbox, or without a publish topic, a
// handler that returns messages is rolled back and dead-lettered with
// [ErrReturnedMessagesInTx]: the router would publish them after the
// commit, and if that failed the redelivery would find the claim and lose
// them.
//
// The outbox forwards transactions in the order of their first writes, and
// the claim is the first write here, so Outbox.LockKeys in the handler is
// refused. For one key's messages in commit order, IdempotencyConfig.LockKeys
// returns the keys to lock (the messages' partition keys): they are locked
// after BEGIN and before the claim, in the same round trip, and another
// delivery that locks one of them waits there for the first transaction
// to end. The wait counts against StoreTimeout; a longer one is an outage,
// retried.
//
// Check-handle-mark has no transaction to write into, and [Idempotency]
// refuses an Outbox: a handler there opens its own with outbox.Transact,
// and a crash between its commit and the mark runs it again.
//
// # Errors
//
// DeadLetter sorts handler errors with [Classify] into three classes, and
// the marks [Poison] and [Outage] name two of them:
//
//   - [ClassPoison] ([PoisonError], panics): the message can never succeed.
//     It is dead-lettered at once.
//   - [ClassOutage] ([OutageError], store errors, unreachable networks,
//     databases and Kafka brokers, dependency timeouts): the
//     infrastructure failed, not the message. It is retried with backoff
//     for as long as the message's context lives and never dead-lettered.
//   - [ClassRetryable], everything else: retried up to
//     DeadLetterConfig.MaxAttempts and MaxElapsedTime, then dead-lettered.
//
// A message that its record mapping could not read (koto.InvalidRecord:
// a CloudEvent without ce_id, say) is poison too: DeadLetter dead-letters
// it at once with the mapping's reason, without calling the handler.
//
// A handler that decodes its payload should wrap the decode error with
// [Poison] (this project's cqrs consumers do): a bare JSON error is
// retryable, since it may as well come from a dependency that answers with
// an HTML error page during its own outage.
//
// # Retries
//
// Every retry (DeadLetter's, a failed mark's, a cqrs reply's) waits by
// [Backoff]: exponential, with equal jitter, each wait drawn uniformly
// between half the nominal wait and all of it. Without jitter every
// consumer that hit the same outage would retry in lockstep and hit the
// recovering dependency together. Equal jitter rather than full jitter
// (anywhere from zero to the nominal wait): the consumers retry against a
// shared dependency that is down, and full jitter sends a share of them
// back almost at once at every step; with equal jitter each wait is at
// least half the nominal one, so the backoff still backs off and the
// elapsed-time budgets stay predictable, while the retries spread over
// half the interval.
//
// # Dead letters
//
// A dead letter is a copy of the message, with its UUID, payload and
// metadata (plus the correlation ID of the context when it had none), and
// the metadata listed at [DeadLetterReasonKey]: why, where and when it
// failed. Messages the handler returned are dropped with it. A dead letter
// that Kafka refuses as too large (a message near the topic's
// max.message.bytes, grown by that metadata) is sent again without its
// payload and with [DeadLetterDroppedKey] saying so, rather than nacked:
// nacked, it would be refused again on every redelivery and block its
// partition. The message itself stays at its original position.
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
// # Conventions
//
// The router handler's name is the consumer group (topics.ConsumerGroup).
// So the default dead-letter topic is topics.DeadLetter(handler name) and
// the default idempotency scope is the handler name, so that two consumers
// of one message do not skip each other's work.
package middleware
