package broker

import (
	"fmt"
	"strings"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/internal/config"
)

// Mapping names a record mapping of this package, for the tools that read
// records of any of them, such as the dead letters of services on
// different mappings.
type Mapping string

// The record mappings of this package.
const (
	// MappingWatermill is [NewPartitionKeyMarshaler]'s.
	MappingWatermill Mapping = "watermill"
	// MappingCloudEvents is [NewCloudEventsMarshaler]'s.
	MappingCloudEvents Mapping = "cloudevents"
	// MappingWolverine is [NewWolverineMarshaler]'s.
	MappingWolverine Mapping = "wolverine"
)

// Validate reports a name that is none of the mappings; the empty name,
// which [NewMappingReader] takes for detection, is valid.
func (m Mapping) Validate() error {
	switch m {
	case "", MappingWatermill, MappingCloudEvents, MappingWolverine:
		return nil
	}
	return config.Invalid("broker.Mapping", "", "%q is no record mapping; use %s, %s or %s, or leave it empty to detect each record's",
		string(m), MappingWatermill, MappingCloudEvents, MappingWolverine)
}

// DetectMapping returns the mapping whose headers rec carries: CloudEvents
// for a ce_specversion header, content-type application/cloudevents+json
// or a JSON value that names specversion with a JSON content-type (a
// structured event); Watermill's for a _watermill_message_uuid header;
// Wolverine's for an id header with a message-type header; Watermill's,
// which takes every header as it is, for any other record.
func DetectMapping(rec *sarama.ConsumerMessage) Mapping {
	has := map[string]bool{}
	contentType := ""
	for _, h := range rec.Headers {
		if h == nil {
			continue
		}
		key := strings.ToLower(string(h.Key))
		has[key] = true
		if key == contentTypeKey {
			contentType = string(h.Value)
		}
	}
	switch {
	case has[cePrefix+"specversion"], mediaType(contentType) == ceStructuredType,
		has[contentTypeKey] && isJSON(contentType) && looksStructured(rec.Value):
		return MappingCloudEvents
	case has[strings.ToLower(kafka.UUIDHeaderKey)]:
		return MappingWatermill
	case has[wolverineIDHeader] && has[wolverineMessageTypeHeader]:
		return MappingWolverine
	}
	return MappingWatermill
}

// MappingReader reads records of any mapping, each in the mapping its
// headers show or in one mapping for all: an unmarshaler for the tools
// that read what services on different mappings wrote, such as dead
// letters. Build it with [NewMappingReader].
type MappingReader struct {
	forced    Mapping
	byMapping map[Mapping]kafka.Unmarshaler
	foreign   kafka.Unmarshaler // a configured marshaler of another package
}

// NewMappingReader returns a reader of each record in mapping m or, with m
// empty, in the mapping that [DetectMapping] finds for it. A record in the
// mapping of configured (a Config.Marshaler; nil for none) is read by
// configured, so with its [TypeNames]; a record in another mapping by
// that mapping with its default settings, which keep the type names as
// they are on the wire. A configured marshaler of another package reads
// every record, as it does for a subscriber.
func NewMappingReader(m Mapping, configured kafka.Unmarshaler) (*MappingReader, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	// Source names the writer, and a reader writes nothing.
	ce, err := NewCloudEventsMarshaler(CloudEventsConfig{Source: "reader"})
	if err != nil {
		return nil, err
	}
	wolverine, err := NewWolverineMarshaler(WolverineConfig{Source: "reader"})
	if err != nil {
		return nil, err
	}
	r := &MappingReader{forced: m, byMapping: map[Mapping]kafka.Unmarshaler{
		MappingWatermill: NewPartitionKeyMarshaler(), MappingCloudEvents: ce, MappingWolverine: wolverine,
	}}
	switch own := mappingOf(configured); {
	case configured == nil:
	case own == "":
		r.foreign = configured
	default:
		r.byMapping[own] = configured
	}
	return r, nil
}

// mappingOf returns the mapping of a marshaler of this package, "" for
// another.
func mappingOf(u kafka.Unmarshaler) Mapping {
	switch u.(type) {
	case partitionKeyMarshaler:
		return MappingWatermill
	case cloudEventsMarshaler:
		return MappingCloudEvents
	case wolverineMarshaler:
		return MappingWolverine
	}
	return ""
}

// Mapping returns the mapping r reads rec in; "" when a configured
// marshaler of another package reads it.
func (r *MappingReader) Mapping(rec *sarama.ConsumerMessage) Mapping {
	switch {
	case r.foreign != nil:
		return ""
	case r.forced != "":
		return r.forced
	}
	return DetectMapping(rec)
}

// Unmarshal reads rec in the mapping [MappingReader.Mapping] names.
func (r *MappingReader) Unmarshal(rec *sarama.ConsumerMessage) (*message.Message, error) {
	if r.foreign != nil {
		return r.foreign.Unmarshal(rec)
	}
	m := r.Mapping(rec)
	msg, err := r.byMapping[m].Unmarshal(rec)
	if err != nil {
		return nil, fmt.Errorf("broker: read as %s: %w", m, err)
	}
	return msg, nil
}
