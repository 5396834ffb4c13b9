// Package cqrs is the messaging API that handlers use: publish an
// integration event, send a command fire-and-forget or wait for its reply,
// and write a consumer as one typed function.
//
// In the library's layers (README, Architecture) it composes the others:
// broker, middleware, the PostgreSQL store and the outbox.
//
// It writes the messages of Watermill's components/cqrs (the type name in
// the metadata key of its JSONMarshaler) and the replies of
// components/requestreply (its metadata keys), so that Watermill's own
// CQRS processors can read what this package writes; it builds them
// itself, resolving once per Go type what its buses would reflect on for
// every message.
//
// # Publishing
//
// An [EventPublisher] publishes an event to topics.Event(service,
// topics.TypeName(event)), "orders.order-placed" for an OrderPlacedEvent of
// the orders service, unless a [Route] sends the type elsewhere; a
// [CommandDispatcher] sends a command the same way to its route. The
// payload is JSON, the type name travels in the metadata key
// koto.TypeNameMetadataKey, the message UUID is a new UUIDv7 (or the
// message's own ID, see [MessageIDer]), the correlation ID comes from the
// context (a new one when it has none), and the Kafka partition key from
// the message (see [PartitionKeyer]).
//
// The error of Publish, Send or Request wraps the publisher's, so
// koto.ClassOf sees its class: a broker that cannot be reached is an
// outage, and a handler that returns it is retried until the broker is
// back, never dead-lettered; a message the broker refuses for good (too
// large, say) is not, and is dead-lettered after its retries. A call that
// its deadline or Close ended returns [ErrTimeout] or [ErrClosed] instead
// (see Deadlines and broker faults), both outages too.
//
// # Commands and request/reply
//
// A CommandDispatcher sends commands to their routed topics, by convention
// topics.Command(handling service, type name), where that service's command
// consumers listen. Send is fire-and-forget; [Request] waits for the
// handler's result or error.
//
// Replies travel on one reply topic per requesting service,
// [ReplyTopic](service) ("orders.replies"). Every dispatcher instance reads
// that topic from its newest offset without a consumer group, through a
// single broker.TailReader opened by Start, and hands each reply to the
// waiting Request with the same operation ID; replies to other instances
// and late replies are dropped. No Kafka subscription is made per request,
// so a request costs one produce and one fetch each way. Because nothing
// reads the topic as a group, no instance can take another's replies.
//
// An error returned by the handler reaches the caller as a [*HandlerError]
// with the handler's message and kind. A reply's type name is its
// command's with "-reply" ("reserve-stock-reply"), so that it has one in
// record mappings that require it, such as CloudEvents.
//
// # Deadlines and broker faults
//
// Request, Send and EventPublisher.Publish end at the deadline of their
// context or after their configured Timeout (10s), whichever
// comes first, whatever the broker does. The error then matches
// [ErrTimeout] and context.DeadlineExceeded and says which stage ran out:
// the start of the dispatcher (a Request during Start waits for it), the
// send (Kafka did not acknowledge the message in time), or the wait for the
// reply. A cancelled context gives context.Canceled, not ErrTimeout. Close
// ends every Request and Send under way with [ErrClosed], those still
// sending included, and ends a Start under way. A Request before Start
// returns [ErrNotStarted], an outage like ErrClosed: a handler that sends
// requests before its dispatcher has started is retried, not dead-lettered.
//
// A message given up while it was being sent may still be written: Kafka
// may have it already, or the producer may still deliver it. Such a command
// may reach its handler and be handled; its reply then finds no request
// waiting and is dropped, like every late reply. A call that timed out has
// an unknown outcome: retry it only when doing it twice is harmless.
//
// Watermill's message.Publisher takes no context, and watermill-kafka's
// waits on sarama's synchronous producer, which only sarama's own timeouts
// bound (a 30 s read timeout, 10 retries). So the calls of this package put
// their bounded context on the message, and broker.Publisher stops waiting
// when that context ends. This keeps the publisher a plain Watermill
// publisher, so the calls keep working through any other one (an outbox, a
// test double), which is then called as it is and bounds the call itself.
// It also keeps the hot path at one hand-off to sarama's asynchronous
// producer per message, with no goroutine per call, and every goroutine
// owned: the producer belongs to the publisher, whose Close waits for the
// records still in flight. Running each Publish on a goroutine left behind
// at the deadline would leave goroutines that nobody waits for; a producer
// of the dispatcher's own would bypass the publisher the user chose.
//
// The reply subscription resumes by itself when it stops reading a
// partition of the reply topic (see broker.TailReader), and reads the
// replies written meanwhile. While it cannot read, Request fails at once,
// without sending, with an error that wraps broker.ErrReaderDown and the
// cause, marked koto.Outage (an outage); [CommandDispatcher.Err]
// reports the same, for health checks. A Request already waiting keeps
// waiting for its reply, and its timeout error names the fault if one is
// still under way.
//
// # Consumers
//
// [NewEventConsumer], [NewCommandConsumer] and
// [NewCommandConsumerWithResult] turn one typed function into a
// [Consumer]; the function gets the message decoded from JSON, with the
// correlation ID of its message in its context (correlation.FromContext)
// and the message itself in Watermill's cqrs.OriginalMessageFromCtx. A
// [Service] registers consumers on a Watermill router ([Service.Register]):
// each subscribes to its topic ([Topic]'s, or topics.Event([From]'s
// service, type name) for an event, or topics.Command(this service, type
// name) for a command) with the consumer group topics.ConsumerGroup(service,
// type name) (or [ConsumerGroup]'s), which is also its handler name, behind
// middleware.Defaults: correlation, telemetry, one log line per message,
// retries with backoff and dead letters to topics.DeadLetter(group), and,
// for idempotent consumers, deduplication with the service's store, by
// message ID in the scope of the consumer group ([IdempotencyScope] changes
// the scope). Event consumers are idempotent by default, command consumers
// not ([Idempotent] changes it).
//
// With ServiceConfig.DeadLetter.Parking.Delays a consumer parks a message
// whose attempts failed and tries it again later, its key's later
// messages waiting behind it (middleware's Parking); a DurableOutbox's
// Service parks in the DurableOutbox's table ([DurableOutbox.Parking]), a
// Service of NewService in the parking.Store that Parking.Store names.
//
// A consumer handles one type. A payload that does not decode is poison
// and dead-lettered at once; so is a message on its topic with another type
// name ([ErrUnexpectedType]), unless the consumer was given
// [SkipOtherTypes] for a topic shared by several types; a message with no
// type name at all, from a producer outside this package, is decoded as the
// consumer's type. A handler error is retried with backoff and then
// dead-lettered, at once when it is marked koto.Poison; an outage is
// retried until it ends.
//
// A command sent with Request gets a reply: the handler's result as JSON,
// or its error (message and kind, see HandlerError), and the command is
// acked either way: the requester has the outcome and decides what to do. A
// panic is replied as a [KindInternal] error and the command dead-lettered;
// a payload that does not decode is replied as [KindBadRequest] and
// dead-lettered. A command of another type is dead-lettered (or skipped)
// without a reply: its own consumer may answer it. The handler runs once
// per delivery: a reply that fails to publish with an outage is retried on
// its own, with ServiceConfig.DeadLetter.Backoff, until it is published or
// the message's context ends; then the command is nacked as an outage and
// redelivered, never dead-lettered. A reply the broker refuses for good
// dead-letters the command. A command sent with Send is handled as an
// event is.
//
// # Batch consumers
//
// [NewBatchEventConsumer] handles events in batches: its function gets
// many [BatchItem]s at once, each event decoded with its message, in the
// order of their partitions' offsets, duplicates left out, and in a
// DurableOutbox's Service writes all their effects in one transaction that
// claims them all (middleware's Batches). The Service reads them with a
// batch subscriber (broker.NewBatchSubscriber), which [WithBatch] sizes.
// An event that does not decode, or of another type, is dead-lettered (or
// skipped) alone before its batch runs. The function names the events that
// failed with middleware.FailMessages on their Message; any other error
// fails the batch, which is then taken apart to find the event that fails.
// Commands have no batch consumer: a request waits for its own command's
// result.
//
// # Durable outbox
//
// [NewDurableOutbox], given the pool of a PostgreSQL database and the
// broker configuration, sets up the database's outbox (package outbox) and
// processed-messages store (idempotency/postgres) and the table of parked
// messages (package parking), starts the outbox's forwarder, and makes
// the facades of this package go through the outbox:
//
//   - [DurableOutbox.EventPublisher]'s Publish and the Send of
//     [DurableOutbox.CommandDispatcher] write into the outbox in the
//     transaction of their context, which commits with the business rows
//     or rolls back with them; the forwarder takes what committed to Kafka
//     milliseconds later. Request publishes directly: it waits for a reply,
//     which could not come before the commit.
//   - [DurableOutbox.Service] runs the idempotent consumers in the
//     transactional mode (middleware's IdempotencyConfig.Transactional)
//     bound to the outbox: the claim of the message, the handler's writes (through
//     postgres.TxFromContext(ctx)) and the events it publishes commit
//     together, once however often the message is delivered. For one key's
//     events in commit order, give the consumer [LockKeys].
//   - the outbox's Transact ([DurableOutbox.Outbox]) opens such a
//     transaction for code outside a consumer, an API handler that saves an
//     order, say.
//
// A publish with no transaction in its context fails with an error that
// wraps outbox.ErrNoTransaction, on purpose: code that lost its
// transaction on the way (a context.Background(), a goroutine) would
// otherwise announce writes that may still roll back, silently. Publish
// inside Transact, or build the publisher on Outbox().AutoTxPublisher(),
// which writes such messages into the outbox in a transaction of their
// own: durable, and in order with the rest.
//
// Each message in flight in a transactional consumer holds a connection of
// the DurableOutbox's pool until its transaction ends; a batch consumer
// holds one per batch running, its broker.BatchConfig.Parallel. With
// ServiceConfig.Broker.Concurrency N above 1, a consumer may hold N, and
// Register refuses transactional consumers whose connections, with those
// of the ones registered before on the same DurableOutbox (until their
// Service's Close) and 2 to spare, exceed the pool's MaxConns: their
// messages would wait for connections until they time out, retried as
// outages. Raise MaxConns (pool_max_conns in the database URL), or lower
// Concurrency. With Concurrency 0 or 1 a consumer holds one per partition
// it is assigned, which Register cannot know: size the pool for them.
//
// In a transactional Service, consumers that are not idempotent (command
// consumers, by default) run outside a transaction. An idempotent command
// consumer answering a request runs its handler in a savepoint: a handler
// error reaches the requester, the handler's writes are undone and the
// claim commits. The reply is published when the handler returns, before
// the commit; if the commit then fails the command is handled again and
// its second reply is dropped.
//
// # Scheduled messages
//
// [EventPublisher.PublishAt] and [EventPublisher.PublishAfter], and
// [CommandDispatcher.SendAt] and [CommandDispatcher.SendAfter], write
// their message into the outbox's schedule (package outbox, Scheduling)
// instead of the outbox, in the transaction of ctx as Publish and Send
// write: a rollback schedules nothing. The message is the one Publish or
// Send would write, with its type name, message ID, partition key,
// correlation ID and trace context, and its consumers get it at or after
// its time. They return the schedule's ID: Cancel with it, in a
// transaction, and the message is never sent, or learn that it was sent
// already (outbox.ErrSent). Only publishers and dispatchers on an outbox's
// publishers (those of a DurableOutbox) schedule; others return
// [ErrCannotSchedule].
//
// # Telemetry
//
// Each config takes a *telemetry.Telemetry (nil: OpenTelemetry's global
// providers). Publishers, dispatchers and services publish through its
// Publisher decorator, so every event, command, request, reply and dead
// letter gets a producer span and carries its trace context; consumers
// run behind its Middleware; each Request is a client span around its
// request and reply. The telemetry package lists the spans and metrics.
package cqrs
