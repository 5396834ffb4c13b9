package telemetry

import "go.opentelemetry.io/otel/attribute"

// scopeName is the instrumentation scope of the tracer and the meter: the
// module path.
const scopeName = "github.com/koto-dev/watermill-koto"

// Names of the instruments of this project's own, beside those of
// OpenTelemetry's messaging semantic conventions (messaging.process.duration,
// messaging.client.consumed.messages, messaging.client.sent.messages,
// messaging.client.operation.duration). The package doc lists their units
// and attributes.
const (
	// metricConsumerRetries counts the attempts of a handler that failed
	// and are retried after a backoff: outcome retry.
	metricConsumerRetries = "koto.consumer.retries"
	// metricConsumerDeadLetters counts the messages sent to a dead-letter
	// topic.
	metricConsumerDeadLetters = "koto.consumer.dead_letters"
	// metricBatchSize is the number of messages of each batch a batch
	// handler ran, by flush reason.
	metricBatchSize = "koto.consumer.batch.size"
	// metricStoreDuration is the duration of the idempotency store's
	// calls, failed ones with error.type.
	metricStoreDuration = "koto.idempotency.store.duration"
	// metricRequestDuration is the duration of a request/reply, from the
	// send of the request to the reply or the end of the wait.
	metricRequestDuration = "koto.request.duration"
	// metricRequestTimeouts counts the requests that got no reply in time.
	metricRequestTimeouts = "koto.request.timeouts"
	// metricOutboxWaiting is the number of outbox rows not yet forwarded,
	// observed through [Telemetry.ObserveOutbox].
	metricOutboxWaiting = "koto.outbox.rows.waiting"
	// metricOutboxLag is the age of the oldest outbox row not yet
	// forwarded, observed through [Telemetry.ObserveOutbox].
	metricOutboxLag = "koto.outbox.forward.lag"
	// metricScheduled is the number of messages scheduled in an outbox
	// and not yet due, observed through [Telemetry.ObserveOutbox].
	metricScheduled = "koto.outbox.scheduled"
	// metricLateness is how late a scheduled message was moved into the
	// outbox: its fire time minus its due time.
	metricLateness = "koto.outbox.schedule.lateness"
	// metricParked and metricParkedKeys are the messages parked for a
	// consumer group and the record keys they wait on, observed through
	// [Telemetry.ObserveParked].
	metricParked     = "koto.parked.messages"
	metricParkedKeys = "koto.parked.keys"
)

// Attribute keys of this project's own, on spans and metrics.
const (
	// attrOutcome is what became of a delivery: "ok", "duplicate",
	// "parked", "dead-lettered", "nacked" or "probe".
	attrOutcome = attribute.Key("koto.outcome")
	// attrAttempts is how many times the handler ran in one delivery, when
	// more than once.
	attrAttempts = attribute.Key("koto.attempts")
	// attrErrorClass is the class of a handler error that is retried or
	// dead-lettered: "retryable", "outage" or "poison".
	attrErrorClass = attribute.Key("koto.error_class")
	// attrStoreOperation is the idempotency store call: "check", "mark",
	// "claim" (the begin and claim of the transactional mode, unless
	// deferred) or "commit".
	attrStoreOperation = attribute.Key("koto.idempotency.operation")
	// attrRequestOutcome is how a request/reply ended: "ok", "handler-error", "timeout" or "error".
	attrRequestOutcome = attribute.Key("koto.request.outcome")
	// attrBatchFlush is why a batch stopped filling: "count", "bytes",
	// "time", or "retry" for a message retried alone.
	attrBatchFlush = attribute.Key("koto.batch.flush")
	// attrOutboxTable is the outbox table of the outbox gauges.
	attrOutboxTable = attribute.Key("koto.outbox.table")
	// attrParkedTable is the parking table of the parked gauges.
	attrParkedTable = attribute.Key("koto.parked.table")
)
