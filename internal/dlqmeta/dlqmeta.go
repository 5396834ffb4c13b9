// Package dlqmeta names the metadata of a dead letter, which the
// dead-letter middleware writes and package deadletter reads.
package dlqmeta

// Metadata keys that the dead-letter middleware adds to a dead letter, as
// headers of the consumed record or as metadata. A key already present (a
// dead letter that was replayed and failed again) is overwritten.
const (
	// Reason holds the text of the handler's error.
	Reason = "dead_letter_reason"
	// ErrorType holds the Go type of the error's root cause,
	// the innermost error of its Unwrap chain (e.g. "*json.SyntaxError"),
	// or "*middleware.PanicError" for a panic.
	ErrorType = "dead_letter_error_type"
	// ErrorClass holds the [koto.Class]: "poison" or
	// "retryable".
	ErrorClass = "dead_letter_error_class"
	// OriginalTopic holds the topic the message was consumed from.
	OriginalTopic = "dead_letter_original_topic"
	// OriginalPartition holds the Kafka partition it was consumed
	// from, in decimal; absent when the subscriber is not Kafka.
	OriginalPartition = "dead_letter_original_partition"
	// OriginalOffset holds its offset in that partition, in decimal;
	// absent when the subscriber is not Kafka.
	OriginalOffset = "dead_letter_original_offset"
	// ConsumerGroup holds the consumer group that failed it.
	ConsumerGroup = "dead_letter_consumer_group"
	// Handler holds the name of the router handler.
	Handler = "dead_letter_handler"
	// Attempts holds how many times the handler ran in the
	// delivery that dead-lettered it, in decimal.
	Attempts = "dead_letter_attempts"
	// FailedAt holds when it was dead-lettered, in UTC,
	// RFC 3339 with nanoseconds.
	FailedAt = "dead_letter_failed_at"
	// History holds, for a message that was parked, each delivery that
	// failed and parked it, oldest first, as a JSON array of objects
	// with failed_at, attempts, error and retry_at.
	History = "dead_letter_history"
	// Dropped is set on a dead letter that Kafka refused as too large: it
	// was sent again without its payload, and this key says why (see the
	// middleware's package doc, Dead letters).
	Dropped = "dead_letter_dropped"
)

// ReplayedFrom is the header a replay adds to each record it sends:
// "<dead-letter topic>/<partition>/<offset>" of the dead letter it came
// from. The dead_letter_* keys above stay as they were, as history; a
// replayed message that fails again keeps this key and gets those updated.
const ReplayedFrom = "dead_letter_replayed_from"
