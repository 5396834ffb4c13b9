// Package middleware gives a Watermill router reliable consumer semantics:
// correlation IDs that follow the work ([Correlation]), duplicates skipped
// with a store that survives restarts, or claimed in the transaction that
// holds the handler's effects ([Idempotency]), poison messages sent to a
// dead-letter topic while outages are waited out, and failing messages
// parked to be tried again later, in their key's order ([DeadLetter]),
// and one structured log line per message ([Logging]). It reads the error classes
// of package koto and talks to no transport itself.
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
// covers the whole delivery and is the parent of everything inside.
// Logging wraps the rest so that it times the whole delivery and decides
// its outcome, which it logs and reports to the span and metrics.
// DeadLetter wraps Idempotency so that a store outage reaches it as an
// outage (retried, never dead-lettered) and so that a dead-lettered
// message is never marked processed: replayed from the dead-letter topic
// with the same UUID, it runs the handler again. Idempotency is innermost
// so that only a handler that succeeded is marked and each retry checks
// again; in the transactional mode, so that each retry is a transaction of
// its own.
//
// Parking, when configured, is part of DeadLetter (DeadLetterConfig.Parking),
// not a middleware of its own: it decides a delivery's fate with the
// retries and the dead letter, each message on its own, so that it also
// applies where a batch handler takes Idempotency's place.
//
// DeadLetter does the work of Watermill's Retry and PoisonQueue together;
// do not add those two, nor Watermill's Deduplicator: it records a message
// before the handler runs, so a failed message's redelivery is dropped, a
// lost message. Close the router, then the [Chain], then the store.
//
// # Check, handle, mark
//
// By default [Idempotency] skips a message whose scoped key the store has
// (the key is [MessageKey] within the scope [HandlerName]; the store keeps
// idempotency.ScopedKey(scope, key)): it is acked without calling the
// handler. Otherwise the handler runs, and only when it succeeds is the key
// marked, so a failing handler's retry or redelivery runs it again.
// Delivery stays at-least-once: a crash between the handler and the mark
// runs the handler again. A failed mark is retried in place with
// MarkBackoff, so a store outage does not run the handler twice.
//
// Within one middleware, the deliveries of a key take turns: while one is
// between its check and its mark (or its failure), another copy of the
// message (in flight at once in a concurrent subscriber, from another
// record key or partition) waits, and then checks: after the mark it is a
// duplicate, after a failure it runs the handler. A copy whose context
// ends while it waits is an outage. Copies handled at once in two
// processes can still both run the handler: that is at-least-once too.
//
// A message whose handler returns messages is marked only once the router
// has published them and acked it, by a goroutine that waits for the ack
// (at most MarkAfterAckTimeout) and then marks: a failed publish marks
// nothing and the redelivery returns the messages again. A delivery of the
// same key that arrives meanwhile waits for that mark and is then a
// duplicate, or, after StoreTimeout, an outage. [Chain.Close] waits for
// these marks.
//
// # Exactly-once effects
//
// With IdempotencyConfig.Transactional, for handlers whose effects live in
// the store's PostgreSQL database, each delivery runs in a transaction of
// the store (idempotency.TxStore) that claims its key first. The handler
// finds it with postgres.TxFromContext(msg.Context()), writes through it
// and neither commits nor rolls it back: its writes commit with the claim,
// or roll back with it when it fails or panics. A key with a fresh mark is
// a duplicate and never reaches the handler. A concurrent delivery of the
// same key waits on the claim until the first transaction ends: after a
// commit it is a duplicate, after a rollback it runs. Give the pool a
// connection per message handled at once, and some to spare.
//
// IdempotencyConfig.DeferClaim sends BEGIN and the claim with the handler's
// first statement instead, a round trip less per message. The handler then
// starts before the claim is decided: on a duplicate its first statement
// fails with postgres.ErrDuplicate and the message is acked as a
// duplicate whatever the handler returns. The effects in the transaction
// still commit once, but the handler's code before its first statement (an
// HTTP call, an email) runs for every redelivery, so DeferClaim suits
// handlers whose work before their first statement has no outside effects.
//
// A failed begin, claim or commit is an outage, and so is a handler error
// once the transaction's connection broke. A commit that PostgreSQL turns
// into a rollback, because a statement failed and the handler returned nil
// all the same, is retried as an ordinary error.
//
// # Outgoing messages in the transaction
//
// A message published straight to Kafka is out before the commit, and
// announces effects that may never commit. IdempotencyConfig.Outbox, the
// ContextPublisher of the outbox in the store's database, makes them commit
// with the effects instead: the messages the handler returns are written
// through it in the transaction, for the router handler's publish topic,
// and the router publishes nothing itself. Any other publisher there is
// refused: one with a transaction of its own (the outbox's AutoTxPublisher
// or Publisher(tx)) would commit them apart from the claim, published
// though the handler's transaction rolled back. The handler can also
// publish through that outbox directly (the cqrs publishers built on it),
// and register outbox.AfterCommit work. Without an outbox, or without a publish
// topic, a handler that returns messages is dead-lettered with
// [ErrReturnedMessagesInTx]: the router would publish them after the
// commit, and if that failed the redelivery would find the claim and lose
// them.
//
// The outbox forwards transactions in the order of their first writes,
// and the claim is the first write here; IdempotencyConfig.LockKeys returns
// the partition keys to lock before the claim, so that one key's messages
// reach Kafka in the order their transactions commit.
//
// # Errors
//
// DeadLetter sorts handler errors by their koto.Class (DeadLetterConfig.Classify,
// koto.ClassOf by default): poison (a koto.Poison mark, a panic) is
// dead-lettered at once; an outage (a koto.Outage mark, a store error, an
// unreachable database or broker) is retried with backoff for as long as
// the message's context lives and never dead-lettered; anything else is
// retried up to MaxAttempts and MaxElapsedTime, then dead-lettered. Every
// retry waits by DeadLetterConfig.Backoff.
//
// A handler error marked koto.RetryAfter asks for a later attempt: with
// parking it is parked at once, for the delay it gives; without, it is a
// retryable error like any other.
//
// A message that its record mapping could not read (koto.InvalidRecord: a
// CloudEvent without ce_id, say) is poison too: DeadLetter dead-letters it
// at once with the mapping's reason, without calling the handler.
//
// # Parking
//
// In-place retries hold the message's slot, and its key, for as long as
// they last: fine for a blip, not for a dependency that is down for an
// hour. With ParkingConfig.Delays (1m, 5m, 30m, 2h, say) a message whose
// attempts in place failed with a retryable error is parked instead: its
// ParkingStore (parking.Store, in PostgreSQL) keeps it with its next
// attempt time, and the message is acked, so that its slot is free and the
// partition moves on. At that time the store brings it back through its
// topic (parking.Store schedules it in the outbox), to the partition's
// owner, where it runs through the same chain again: telemetry, the
// idempotency claim, the transactional mode and the outbox. If it fails
// again it is parked for the next delay; after the last it is
// dead-lettered. A handler that knows when to come back returns
// koto.RetryAfter and is parked at once for that long. Outages are never
// parked: they hold everything anyway, and are retried in place, as are
// the store's own errors. A message the store cannot keep (one with a
// header that is not UTF-8, which the outbox refuses: a poison error of
// the store) is dead-lettered at once, its reason saying why.
//
// A key keeps its order. While a key (the record key, per consumer group
// and partition) has a parked message, its later messages are parked
// behind it, in offset order, without a handler call, and come back one by
// one after it: when a parked message succeeds, or is dead-lettered, the
// next of its key comes back at once, and the key is free again when its
// queue is empty. Each DeadLetter keeps the set of a partition's parked
// keys in memory, read from the store when a message of a newer group
// generation (koto.Position's Generation) arrives, as after a restart or
// a rebalance: a new owner of the partition knows its parked keys. When
// nothing is parked a message costs a map lookup. A message without a
// record key, or not from Kafka, is parked alone, and waits for nothing.
//
// A parked message comes back with the metadata ParkedIDKey and
// ParkedGroupKey. The consumers of other groups on the topic, behind a
// DeadLetter of their own, skip it as a duplicate (outcome duplicate);
// consumers outside this module see the message again, with its UUID, which
// their idempotency catches. A copy whose entry is no longer parked (sent
// twice, or nacked after its key was released) runs as any other
// message: the idempotency middleware skips it if it was handled. A kill
// between a parking and its ack redelivers the message from Kafka, and the
// store finds its record parked already.
//
// # Probes
//
// Some clients write records that are no messages, to check that they can
// write to a topic: a Wolverine sender that recovers from a failed send
// writes a wolverine-ping envelope, and Wolverine's resources check a raw
// "ping" record. The Wolverine and CloudEvents mappings of package broker
// mark them with koto.ProbeMetadataKey, and DeadLetter acks them without
// calling the handler and without a dead letter, as Wolverine's own
// listeners drop them. [Logging] logs each at debug with outcome probe
// and the kind of probe, and the telemetry counts it with koto.outcome
// "probe".
//
// # Dead letters
//
// A dead letter goes to topics.DeadLetter(consumer group) unless
// DeadLetterConfig.Topic says otherwise. A message read from Kafka is
// dead-lettered as the record it was read from
// (koto.ConsumedRecordFromContext): the same key and value, every header
// in its order, the record mapping's included (Watermill's, CloudEvents'
// ce_*, Wolverine's id, message-type, correlation-id, …), followed by the
// metadata below as headers, those of an earlier failure replaced. The
// middleware marks the dead letter with koto.ContextWithVerbatim, and the
// broker's publisher writes it so whatever mapping it publishes in: a
// consumer of CloudEvents whose publisher writes Wolverine envelopes has
// CloudEvents dead letters, which a replay writes back for it to read as
// the same message. A record without a correlation ID gets the one its
// delivery ran with, as correlation_id. A message from elsewhere is a
// copy of the message, with its UUID, payload and metadata (and the
// correlation ID of the context when it had none), and the same metadata:
//
//	dead_letter_reason              the error's text
//	dead_letter_error_type          the Go type of its root cause, e.g. *json.SyntaxError
//	dead_letter_error_class         poison or retryable
//	dead_letter_original_topic      where it was consumed from
//	dead_letter_original_partition  (Kafka only)
//	dead_letter_original_offset     (Kafka only)
//	dead_letter_consumer_group      the consumer group that failed it
//	dead_letter_handler             the router handler
//	dead_letter_attempts            handler calls in the delivery that gave up
//	dead_letter_failed_at           RFC 3339 with nanoseconds, UTC
//	dead_letter_history             a parked message's failed deliveries, JSON (below)
//	dead_letter_dropped             why the payload was left out (below)
//
// The dead letter of a parked message names where it was consumed first,
// and dead_letter_history holds each delivery that failed and parked it,
// oldest first: [{"failed_at", "attempts", "error", "retry_at"}, ...]. It
// carries no ParkedIDKey or ParkedGroupKey, so that a replay runs as a new
// message.
//
// Package deadletter reads them back, in any mapping. The messages the
// handler returned are dropped with it. A dead letter that Kafka refuses
// as too large (a message near the topic's max.message.bytes, grown by
// that metadata) is sent again without its payload, and its failure's
// values cut to 1 KiB, with dead_letter_dropped saying so, rather than
// nacked: nacked, it would be refused again on every redelivery and block
// its partition. The record's key and its headers of at most 1 KiB stay
// (up to 16 KiB of them), so that the tools still find it by its UUID and
// type; a message from elsewhere keeps only the failure's metadata, its
// correlation ID and its partition key. The message itself stays at its
// original position.
//
// # Log lines
//
// [Logging] writes one line per delivery with handler, topic, partition
// and offset, message_uuid, correlation_id, duration and outcome: ok,
// duplicate and probe at debug, parked (with parked_id and retry_at, or
// parked_behind) and nacked (the chain returned an error: an outage that
// outlived the message's context, a dead letter that could not be
// published) at warn, dead-lettered at error. Each retry is a warn line of
// its own, outcome retry, when it is scheduled. [NewLogHandler] adds the
// correlation ID to the handler's own records.
//
// # Batches
//
// A batch subscriber (broker.NewBatchSubscriber) hands out many messages
// at once, as one Watermill message whose context carries them
// (koto.Batch): a partition's records in offset order, a key's records
// together, a key's next batch only once its messages in this one are
// settled. [BatchDefaults] builds the chain that runs them: each
// [BatchChain.Handler] gives a router handler's batches to a batch
// handler ([BatchHandlerFunc]) and settles every message of a batch on
// its own, with the semantics the per-message chain gives one message:
// its correlation ID in its context, its dead letter, retries and
// outcome, its log lines and metrics.
//
// Idempotency is claimed per batch. In the transactional mode one
// transaction claims every message of the batch in one statement
// (idempotency.TxBatchStore), the handler writes through it
// (postgres.TxFromContext, on ctx and on each message's context, which
// also carries the message's correlation ID, so that what the handler
// publishes through the outbox for a message commits with the batch), and
// the acks follow the commit. Without it one statement checks the batch's
// keys before the handler and one marks those it handled after it
// (idempotency.BatchStore; other stores are called per key). Messages
// already processed, and copies of one message within a batch, never
// reach the handler; they are acked as duplicates.
//
// Before a batch runs, a message that its record mapping could not read,
// that BatchConfig.Prepare fails (a payload that does not decode), or
// without an idempotency key, goes its own way at once (dead-lettered, if
// poison); a probe of another client is acked. The handler gets the
// others, in the order of their partitions' offsets.
//
// A handler that returns [MessageErrors] ([FailMessages]) names the
// messages that failed, each with its error. In the transactional mode the
// batch is rolled back and run again without them and without the later
// messages of their keys, so that the others commit once, having run at
// most twice. Each failed message then takes DeadLetter's path alone: a
// poison one is dead-lettered, an outage waited out, a retryable one tried
// again alone after DeadLetterConfig.Backoff, up to MaxAttempts and
// MaxElapsedTime, then dead-lettered; the later messages of its key wait
// for it, and run once it is committed or dead-lettered. Any other error,
// a panic included, names no message: the batch is run again in halves,
// in order, and a half that fails is split again, down to the message
// that fails alone, which then goes DeadLetter's way with the error. That
// costs a batch of n messages at most 2n−1 handler calls, and 2⌈log₂n⌉+1
// when one message is the culprit; a good message runs at most ⌈log₂n⌉+1
// times and commits once. Check-handle-mark has nothing to roll back: the
// messages a handler did not name are marked, and the later messages of a
// failed one's key are not, and run again after it, as at-least-once
// allows. An outage (a store or database that cannot be reached, a
// serialization failure or deadlock, an error marked koto.Outage) runs the
// whole batch again after BatchConfig.Backoff until it succeeds, the chain
// closes or its messages' contexts end, and dead-letters nothing.
//
// A message is acked as soon as its fate is final, so that its key's next
// messages can go into another batch, and nacked, with the messages behind
// it in its key, when its delivery ends before (its partition revoked and
// drained, the chain closed): the subscriber hands them out again. A
// message of another subscriber is run as a batch of its own.
//
// Log lines: one per batch run, at debug (size, flush reason, duration,
// handled, duplicates, failed, requeued, handler calls), and a message's
// retry and dead-letter lines as Logging writes them. Telemetry: a span per
// batch run, linked to each message's trace, the koto.consumer.batch.size
// histogram by flush reason, and each message's outcome, retries and dead
// letter in the consumer metrics.
//
// # Conventions
//
// The router handler's name is the consumer group (topics.ConsumerGroup):
// it names the default dead-letter topic and the default idempotency
// scope, so that two consumers of one message do not skip each other's
// work.
package middleware
