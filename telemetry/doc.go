// Package telemetry gives the messaging of this module OpenTelemetry
// metrics and traces, with the trace context carried from service to
// service in message metadata.
//
// In the library's layers (README, Architecture) it is the part that talks
// to OpenTelemetry; it imports no Kafka or PostgreSQL client.
//
// Everything goes through the OpenTelemetry API. A [Telemetry] built from
// the zero [Config] uses the global meter and tracer providers and the
// global propagator, which do nothing until the application sets them
// (otel.SetMeterProvider, otel.SetTracerProvider, otel.SetTextMapPropagator);
// until then a message costs a few no-op calls. The Config fields name
// other providers instead.
//
// # Wiring
//
// middleware.Defaults (and BatchDefaults) puts [Telemetry.Middleware] in its chain, outermost
// but for Correlation, and decorates the dead-letter publisher with
// [Telemetry.Publisher]; the cqrs Service, EventPublisher and
// CommandDispatcher use both, and the dispatcher wraps each Request in
// [Telemetry.StartRequest]; the outbox's Forwarder reports its table's
// backlog through [Telemetry.ObserveOutbox]. Each takes a *Telemetry in its
// config (nil: the global providers). A chain built by hand puts Middleware
// right inside middleware.Correlation and outside middleware.Logging, which
// decides each delivery's outcome and reports it to the span; a publisher
// of one's own is decorated with Publisher.
//
// # Traces
//
// The trace context travels in the metadata of every message, and so in
// Kafka headers, in the propagator's format: with
// propagation.TraceContext, the W3C traceparent and tracestate. Set it as
// the global propagator or in Config.Propagator; the global default
// propagates nothing.
//
// Spans follow OpenTelemetry's messaging semantic conventions
// (go.opentelemetry.io/otel/semconv/v1.43.0), with messaging.system
// "kafka" and the correlation ID as messaging.message.conversation_id:
//
//   - "send <topic>", kind producer, one per message published through
//     [Telemetry.Publisher]: events, commands, requests, replies, dead
//     letters. Its parent is the span in the message's context, which the
//     cqrs publishers set to the caller's, or else the trace context
//     already in the message's metadata (a message read back from an
//     outbox table or a dead-letter topic), or else none: a root. Its
//     trace context replaces the one in the message's metadata.
//     Attributes: messaging.operation.type
//     and .name "send", messaging.destination.name, messaging.message.id,
//     messaging.kafka.message.key.
//   - "process <topic>", kind consumer, one per delivery through
//     [Telemetry.Middleware], a child of the producer span in the
//     message's metadata. Attributes: messaging.operation.type and .name
//     "process", messaging.destination.name,
//     messaging.consumer.group.name, messaging.destination.partition.id,
//     messaging.kafka.offset, messaging.message.id, and when it ends
//     koto.outcome, koto.attempts, and for a dead letter or a nack the
//     error (status, exception event, error.type, koto.error_class). Each
//     retry adds a "retry" event.
//   - "process batch <handler>", kind consumer, one per batch of a batch
//     handler ([Telemetry.StartBatch]), linked to the "process" span of
//     each of its messages; its parent is the context the batch runs in.
//     Attributes: messaging.batch.message_count,
//     messaging.consumer.group.name, koto.batch.flush; the error of a
//     message that failed.
//   - "request <topic>", kind client, one per cqrs Request: the parent of
//     the request's producer span, and so of the handler's consumer span
//     and the reply's producer span, with koto.request.outcome and a link
//     to the reply's span.
//
// So one order's journey is one trace: the request of a checkout, its
// reply, the event it publishes, the consumer of that event, the event
// that consumer publishes and its consumers, each a child of the span
// that caused it. A dead letter's producer span is a child of the
// delivery that failed; replayed, the message continues that trace.
//
// # Metrics
//
// Instruments of the semantic conventions, with messaging.system "kafka"
// and messaging.destination.name (the topic):
//
//   - messaging.client.consumed.messages ({message}), one per delivery,
//     and messaging.process.duration (s), the time of the whole chain
//     inside the middleware: messaging.operation.name "process",
//     messaging.consumer.group.name, koto.outcome ("ok", "duplicate",
//     "parked", "dead-lettered", "nacked", or "probe" for another client's
//     probe acked unhandled, such as Wolverine's ping) and, for a nack,
//     error.type.
//   - messaging.client.sent.messages ({message}) and
//     messaging.client.operation.duration (s), per Publish call of a
//     decorated publisher: messaging.operation.name "send" (and
//     messaging.operation.type on the duration), error.type when it failed.
//
// And this module's own:
//
//   - koto.consumer.retries ({retry}): the retries that outcome "retry"
//     logs, with messaging.consumer.group.name and koto.error_class
//     ("retryable" or "outage").
//   - koto.consumer.dead_letters ({message}): dead letters published, with
//     messaging.consumer.group.name, koto.error_class ("poison" or
//     "retryable") and error.type (the Go type of the root cause).
//   - koto.idempotency.store.duration (s): each call of the idempotency middleware to
//     its store, with koto.idempotency.operation, messaging.consumer.group.name
//     and, for a failed call, error.type; the errors are the calls with it.
//   - koto.consumer.batch.size ({message}): the messages of each batch a
//     batch handler runs, with messaging.consumer.group.name and
//     koto.batch.flush, why the batch stopped filling ("count", "bytes",
//     "time", or "retry" for a message retried alone).
//   - koto.request.duration (s): each cqrs Request, with
//     koto.request.outcome; koto.request.timeouts ({request}): the ones
//     that timed out.
//   - koto.outbox.rows.waiting ({row}), koto.outbox.forward.lag (s) and
//     koto.outbox.scheduled ({message}, scheduled and not yet moved into
//     the outbox), gauges an outbox reports through
//     [Telemetry.ObserveOutbox], with koto.outbox.table.
//   - koto.parked.messages ({message}) and koto.parked.keys ({key}):
//     the messages parked for each consumer group and the record keys
//     they wait on, gauges a parking table reports through
//     [Telemetry.ObserveParked], with koto.parked.table and
//     messaging.consumer.group.name.
//   - koto.outbox.schedule.lateness (s): for each scheduled message, its
//     fire time minus its due time, which the outbox's forwarder records
//     through [Telemetry.ScheduleFired], with koto.outbox.table.
//
// With the Prometheus exporter the names become, for example,
// messaging_client_consumed_messages_total{koto_outcome="duplicate"} and
// messaging_process_duration_seconds.
//
// # Outbox
//
// A message written to an outbox table through a decorated publisher (a
// cqrs EventPublisher or CommandDispatcher on the outbox's
// ContextPublisher decorates it) keeps its producer span's trace context
// in its metadata. The forwarder
// sends each row's metadata on to Kafka unchanged, so the consumer span is
// the child of the span that wrote the row, in the trace of the
// transaction's caller. Each running forwarder reports its table's
// backlog, the rows waiting and the age of the oldest, through
// [Telemetry.ObserveOutbox] (outbox.ForwarderConfig.Telemetry).
package telemetry
