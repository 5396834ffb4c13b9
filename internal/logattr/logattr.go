// Package logattr holds the keys of the log attributes the project writes,
// so that the middleware's lines and the cqrs consumers' lines name the
// same things the same way.
package logattr

// Keys of the message-handling log lines.
const (
	Handler     = "handler"
	Topic       = "topic"
	Partition   = "partition"
	Offset      = "offset"
	MessageUUID = "message_uuid"
	Correlation = "correlation_id"
	Duration    = "duration"
	Outcome     = "outcome"
	Error       = "error"
	Attempts    = "attempts"
	ErrorClass  = "error_class"
	RetryDelay  = "retry_delay"

	IdempotencyScope      = "idempotency_scope"
	IdempotencyKey        = "idempotency_key"
	IdempotencyStoreError = "idempotency_store_error"
	DeadLetterTopic       = "dead_letter_topic"
	Probe                 = "probe"

	ParkedID     = "parked_id"
	ParkedBehind = "parked_behind"
	ParkedFor    = "parked_for"
	RetryAt      = "retry_at"

	Type        = "type"
	OperationID = "operation_id"
	Result      = "result"
	ErrorKind   = "error_kind"
)
