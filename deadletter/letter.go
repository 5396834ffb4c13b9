package deadletter

import (
	"strconv"
	"time"

	"github.com/koto-dev/watermill-koto/internal/dlqmeta"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
)

// Letter is one record of a dead-letter topic, with what the dead-letter
// middleware recorded about the failure taken out of its metadata. Fields
// whose metadata key is absent (a record that another producer wrote) are
// empty, and the position fields -1.
type Letter struct {
	// Partition and Offset are the record's position in the dead-letter
	// topic.
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	// Timestamp is the record's Kafka timestamp.
	Timestamp time.Time `json:"timestamp"`

	// Mapping is the record mapping it was read in (Config.Mapping);
	// empty when Config.Broker.Marshaler is not one of package broker.
	Mapping broker.Mapping `json:"mapping,omitempty"`
	// UUID is the message UUID, the consumer's idempotency key, as the
	// mapping reads it: _watermill_message_uuid, ce_id, Wolverine's id.
	UUID string `json:"uuid"`
	// TypeName is the type name (koto.TypeNameMetadataKey) as the mapping
	// reads it: ce_type and Wolverine's message-type as they are on the
	// wire, unless Config.Broker.Marshaler maps them.
	TypeName string `json:"type_name,omitempty"`
	// CorrelationID is the correlation ID (correlation.MetadataKey).
	CorrelationID string `json:"correlation_id,omitempty"`

	// FailedAt is when it was dead-lettered (dead_letter_failed_at);
	// zero when absent.
	FailedAt time.Time `json:"failed_at,omitzero"`
	// ErrorClass is the middleware's error class, such as "poison" or
	// "retryable" (dead_letter_error_class).
	ErrorClass string `json:"error_class,omitempty"`
	// ErrorType is the Go type of the error's root cause
	// (dead_letter_error_type).
	ErrorType string `json:"error_type,omitempty"`
	// Reason is the error's text (dead_letter_reason).
	Reason string `json:"reason,omitempty"`
	// Cause names the cause of the failure, [CauseOf] its class and
	// reason: the same for the dead letters of one error class whose
	// reasons read the same once masked. [Filter].Cause selects it.
	Cause string `json:"cause"`
	// ConsumerGroup and Handler are those that failed it.
	ConsumerGroup string `json:"consumer_group,omitempty"`
	Handler       string `json:"handler,omitempty"`
	// Attempts is how many times the handler ran in the delivery that
	// dead-lettered it; 0 when absent.
	Attempts int `json:"attempts,omitempty"`

	// OriginalTopic, OriginalPartition and OriginalOffset are where the
	// message was consumed from; a replay sends it back to OriginalTopic.
	OriginalTopic     string `json:"original_topic,omitempty"`
	OriginalPartition int32  `json:"original_partition"`
	OriginalOffset    int64  `json:"original_offset"`

	// Dropped, when set, says why the dead letter holds no payload and
	// only the failure's metadata: it was too large for the dead-letter
	// topic (dead_letter_dropped). The message is still in
	// OriginalTopic at OriginalPartition and OriginalOffset; Replay does
	// not send it and counts it as unroutable.
	Dropped string `json:"dropped,omitempty"`

	// ReplayedFrom, on a replayed message that failed again, is the
	// dead-letter position it was replayed from, "<topic>/<partition>/<offset>".
	ReplayedFrom string `json:"replayed_from,omitempty"`

	// Replayed is true when the replay group records it as sent, or as
	// passed over (below an offset that Kafka's tools moved the group to).
	Replayed bool `json:"replayed"`
	// Discarded is true when the replay group records it as discarded
	// ([Queue.Discard]): no replay sends it.
	Discarded bool `json:"discarded"`

	// Key is the record key, nil when it has none.
	Key []byte `json:"-"`
	// Metadata is every metadata entry, the ones above included.
	Metadata message.Metadata `json:"metadata"`
	// Payload is the message payload.
	Payload []byte `json:"-"`

	headers []sarama.RecordHeader // as read, for a replay
}

// Position returns where l is in the dead-letter topic.
func (l *Letter) Position() Position { return Position{Partition: l.Partition, Offset: l.Offset} }

// setResolved sets Replayed and Discarded from what the replay group
// records of l's partition.
func (l *Letter) setResolved(pr *progress) {
	l.Discarded = pr.isDiscarded(l.Offset)
	l.Replayed = pr.has(l.Offset) && !l.Discarded
}

// FailedAtOrTimestamp is FailedAt, or the record's timestamp for a record
// without it: the time that time filters compare.
func (l *Letter) FailedAtOrTimestamp() time.Time {
	if l.FailedAt.IsZero() {
		return l.Timestamp
	}
	return l.FailedAt
}

// newLetter decodes a dead-letter record. Metadata comes from the headers
// through r; a record it cannot decode still shows, with its headers taken
// as they are.
func newLetter(rec *sarama.ConsumerMessage, r *broker.MappingReader) *Letter {
	l := &Letter{
		Partition: rec.Partition,
		Offset:    rec.Offset,
		Timestamp: rec.Timestamp,
		Payload:   rec.Value,
		Mapping:   r.Mapping(rec),
	}
	if len(rec.Key) > 0 {
		l.Key = rec.Key
	}
	for _, h := range rec.Headers {
		if h != nil {
			l.headers = append(l.headers, *h)
		}
	}
	if msg, err := r.Unmarshal(rec); err == nil {
		l.UUID, l.Metadata = msg.UUID, msg.Metadata
	} else {
		l.UUID, l.Metadata = rawMetadata(l.headers)
	}
	l.readMetadata()
	return l
}

// rawMetadata reads the UUID and metadata straight from record headers.
func rawMetadata(headers []sarama.RecordHeader) (string, message.Metadata) {
	var uuid string
	md := make(message.Metadata, len(headers))
	for _, h := range headers {
		if string(h.Key) == kafka.UUIDHeaderKey {
			uuid = string(h.Value)
			continue
		}
		md.Set(string(h.Key), string(h.Value))
	}
	return uuid, md
}

// readMetadata fills the fields that come from the metadata.
func (l *Letter) readMetadata() {
	md := l.Metadata
	l.TypeName = md.Get(koto.TypeNameMetadataKey)
	l.CorrelationID = md.Get(correlation.MetadataKey)
	l.ErrorClass = md.Get(dlqmeta.ErrorClass)
	l.ErrorType = md.Get(dlqmeta.ErrorType)
	l.Reason = md.Get(dlqmeta.Reason)
	l.Cause = CauseOf(l.ErrorClass, l.Reason)
	l.Dropped = md.Get(dlqmeta.Dropped)
	l.ReplayedFrom = md.Get(dlqmeta.ReplayedFrom)
	l.ConsumerGroup = md.Get(dlqmeta.ConsumerGroup)
	l.Handler = md.Get(dlqmeta.Handler)
	l.OriginalTopic = md.Get(dlqmeta.OriginalTopic)
	l.OriginalPartition = int32(parseInt(md.Get(dlqmeta.OriginalPartition), 32))
	l.OriginalOffset = parseInt(md.Get(dlqmeta.OriginalOffset), 64)
	l.Attempts = int(max(parseInt(md.Get(dlqmeta.Attempts), 32), 0))
	if t, err := time.Parse(time.RFC3339Nano, md.Get(dlqmeta.FailedAt)); err == nil {
		l.FailedAt = t
	}
}

// parseInt parses a decimal of bits bits, or returns -1.
func parseInt(s string, bits int) int64 {
	n, err := strconv.ParseInt(s, 10, bits)
	if err != nil || n < 0 {
		return -1
	}
	return n
}
