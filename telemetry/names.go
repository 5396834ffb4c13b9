package telemetry

import "go.opentelemetry.io/otel/attribute"

// ScopeName is the instrumentation scope of the tracer and the meter: the
// module path.
const ScopeName = "github.com/koto-dev/watermill-koto"

// Names of the instruments of this project's own, beside those of
// OpenTelemetry's messaging semantic conventions (messaging.process.duration,
// messaging.client.consumed.messages, messaging.client.sent.messages,
// messaging.client.operation.duration). The package doc lists their units
// and attributes.
const (
	// MetricConsumerRetries counts the attempts of a handler that failed
	// and are retried after a backoff: outcome retry.
	MetricConsumerRetries = "koto.consumer.retries"
	// MetricConsumerDeadLetters counts the messages sent to a dead-letter
	// topic.
	MetricConsumerDeadLetters = "koto.consumer.dead_letters"
	// MetricStoreDuration is the duration of the idempotency store's
	// calls, failed ones with error.type.
	MetricStoreDuration = "koto.idempotency.store.duration"
	// MetricRequestDuration is the duration of a request/reply, from the
	// send of the request to the reply or the end of the wait.
	MetricRequestDuration = "koto.request.duration"
	// MetricRequestTimeouts counts the requests that got no reply in time.
	MetricRequestTimeouts = "koto.request.timeouts"
	// MetricOutboxWaiting is the number of outbox rows not yet forwarded,
	// observed through [Telemetry.ObserveOutbox].
	MetricOutboxWaiting = "koto.outbox.rows.waiting"
	// MetricOutboxLag is the age of the oldest outbox row not yet
	// forwarded, observed through [Telemetry.ObserveOutbox].
	MetricOutboxLag = "koto.outbox.forward.lag"
)

// Attribute keys of this project's own, on spans and metrics.
const (
	// AttrOutcome is what became of a delivery: "ok", "duplicate",
	// "dead-lettered" or "nacked".
	AttrOutcome = attribute.Key("koto.outcome")
	// AttrAttempts is how many times the handler ran in one delivery, when
	// more than once.
	AttrAttempts = attribute.Key("koto.attempts")
	// AttrErrorClass is the class of a handler error that is retried or
	// dead-lettered: "retryable", "outage" or "poison".
	AttrErrorClass = attribute.Key("koto.error_class")
	// AttrStoreOperation is the idempotency store call: "check", "mark",
	// "claim" (the begin and claim of the transactional mode, unless
	// deferred) or "commit".
	AttrStoreOperation = attribute.Key("koto.idempotency.operation")
	// AttrRequestOutcome is how a request/reply ended: a [RequestOutcome].
	AttrRequestOutcome = attribute.Key("koto.request.outcome")
	// AttrOutboxTable is the outbox table of the outbox gauges.
	AttrOutboxTable = attribute.Key("koto.outbox.table")
)
