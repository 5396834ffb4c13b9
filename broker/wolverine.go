package broker

import (
	"cmp"
	"fmt"
	"time"

	"github.com/koto-dev/watermill-koto/internal/config"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/idempotency"
)

// Headers of Wolverine's envelope, named as its EnvelopeConstants name
// them, that the Wolverine mapping writes.
const (
	wolverineIDHeader          = "id"
	wolverineCorrelationHeader = "correlation-id"
	wolverineMessageTypeHeader = "message-type"
	wolverineParentIDHeader    = "parent-id"
	wolverineSourceHeader      = "source"
	wolverineSentAtHeader      = "sent-at"
	wolverineContentTypeHeader = contentTypeKey
)

// WolverineConfig configures [NewWolverineMarshaler].
type WolverineConfig struct {
	// Source is the source header of the envelopes this service writes,
	// the service's name, as Wolverine's ServiceName. Required.
	Source string
	// Types maps type names to message-type values and back. Wolverine's
	// default message-type is the .NET type's full name, so a consumer of
	// a .NET event needs an entry such as
	// {"order-placed": "Shop.Contracts.OrderPlaced"}.
	Types TypeNames
}

// Validate reports every problem of the configuration in one error that
// wraps koto.ErrInvalidConfig.
func (c WolverineConfig) Validate() error {
	p := config.For("broker.WolverineConfig")
	if c.Source == "" {
		p.Add("Source", "is empty; set it to the service's name, such as \"orders\"")
	}
	c.Types.validate(p)
	return p.Err()
}

// NewWolverineMarshaler returns the mapping of messages to records as
// Wolverine's default Kafka envelope mapper writes and reads them (the
// broker package doc lists what each header becomes).
func NewWolverineMarshaler(cfg WolverineConfig) (kafka.MarshalerUnmarshaler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return wolverineMarshaler{cfg: cfg, names: newWireNames(cfg.Types)}, nil
}

type wolverineMarshaler struct {
	cfg   WolverineConfig
	names wireNames
}

// wolverineTimeLayout is how Wolverine writes the timestamps of its
// headers, in UTC: "2026-01-02 03:04:05:123456 Z". Its readers also take
// ISO 8601.
const wolverineTimeLayout = "2006-01-02 15:04:05"

// wolverineTime formats t as Wolverine writes sent-at.
func wolverineTime(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("%s:%06d Z", t.Format(wolverineTimeLayout), t.Nanosecond()/1000)
}

// Marshal writes msg as a Wolverine envelope. The id is the message UUID;
// an ID that is not a UUID is written as idempotency.KeyUUID of it, the
// UUID the stores keep for it. Without a partition key, the record key is
// the id, as Wolverine sets it.
func (m wolverineMarshaler) Marshal(topic string, msg *message.Message) (*sarama.ProducerMessage, error) {
	md := msg.Metadata
	rec := newRecord(topic, msg)
	id := ""
	if msg.UUID != "" {
		id = idempotency.KeyUUID(msg.UUID).String()
	}
	if rec.Key == nil && id != "" {
		rec.Key = sarama.StringEncoder(id)
	}
	var h headerList
	h.add(wolverineIDHeader, id)
	h.add(wolverineCorrelationHeader, md.Get(correlation.MetadataKey))
	h.add(wolverineMessageTypeHeader, m.names.wire(md.Get(koto.TypeNameMetadataKey)))
	h.add(wolverineContentTypeHeader, cmp.Or(md.Get(contentTypeKey), ceJSONType))
	h.add(wolverineSourceHeader, cmp.Or(md.Get(wolverineSourceHeader), m.cfg.Source))
	h.add(wolverineParentIDHeader, md.Get(traceParentKey))
	h.add(wolverineSentAtHeader, cmp.Or(md.Get(wolverineSentAtHeader), wolverineTime(time.Now())))
	h.addRest(md, wolverineWritten)
	rec.Headers = h
	return rec, nil
}

// wolverineWritten reports whether Marshal has written the metadata entry
// key as an envelope header already.
func wolverineWritten(key string) bool {
	switch key {
	case correlation.MetadataKey, koto.TypeNameMetadataKey, contentTypeKey, wolverineSourceHeader,
		traceParentKey, wolverineSentAtHeader, koto.PartitionKeyMetadataKey, kafka.UUIDHeaderKey,
		wolverineIDHeader, wolverineCorrelationHeader, wolverineMessageTypeHeader, wolverineParentIDHeader:
		return true
	}
	return false
}

// Unmarshal reads a Wolverine envelope. It never fails: a record without
// an id gets an empty UUID, which the idempotency middleware replaces with
// the record's topic, partition and offset. Wolverine's probes are marked
// with koto.ProbeMetadataKey.
func (m wolverineMarshaler) Unmarshal(rec *sarama.ConsumerMessage) (*message.Message, error) {
	md := recordHeaders(rec)
	probe := probeOf(rec, md)
	id := take(md, wolverineIDHeader)
	msg := message.NewMessage(id, rec.Value)
	setIf(md, correlation.MetadataKey, take(md, wolverineCorrelationHeader))
	setIf(md, koto.TypeNameMetadataKey, m.names.name(take(md, wolverineMessageTypeHeader)))
	setIf(md, traceParentKey, take(md, wolverineParentIDHeader))
	if key := string(rec.Key); key != "" && key != id {
		md.Set(koto.PartitionKeyMetadataKey, key)
	}
	setIf(md, koto.ProbeMetadataKey, probe)
	msg.Metadata = md
	return msg, nil
}
