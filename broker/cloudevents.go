package broker

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/koto-dev/watermill-koto/internal/config"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/correlation"
)

// defaultCorrelationExtension is the CloudEvents extension attribute that
// carries the correlation ID unless [CloudEventsConfig] names another.
const defaultCorrelationExtension = "correlationid"

// CloudEventsConfig configures [NewCloudEventsMarshaler].
type CloudEventsConfig struct {
	// Source is the ce_source of the events this service writes: a
	// URI-reference that names the service, such as "/orders" or
	// "urn:shop:orders". Required.
	Source string
	// Types maps type names to ce_type values and back; the zero value
	// keeps the kebab names ("order-placed"), a Prefix such as
	// "com.example.shop." makes them reverse-DNS.
	Types TypeNames
	// CorrelationExtension names the extension attribute of the
	// correlation ID (ce_<name> in binary mode). Default:
	// "correlationid". Wolverine's CloudEvents write it as
	// "traceid".
	CorrelationExtension string
	// DeduplicateByID makes ce_id alone the idempotency key of the events
	// read, for an estate whose consumers deduplicate by the id. By
	// default the key is ce_source and ce_id, an event's identity in
	// CloudEvents 1.0 (see Record mappings in the package documentation).
	DeduplicateByID bool
}

func (c *CloudEventsConfig) setDefaults() {
	c.CorrelationExtension = cmp.Or(c.CorrelationExtension, defaultCorrelationExtension)
}

// extensionName is what CloudEvents allow an attribute name to be.
var extensionName = regexp.MustCompile(`^[a-z0-9]{1,20}$`)

// Validate reports every problem of the configuration, zero fields
// counting as their defaults, in one error that wraps koto.ErrInvalidConfig.
func (c CloudEventsConfig) Validate() error {
	c.setDefaults()
	p := config.For("broker.CloudEventsConfig")
	if c.Source == "" {
		p.Add("Source", "is empty; set it to a URI-reference naming the service, such as \"/orders\"")
	}
	if !extensionName.MatchString(c.CorrelationExtension) || ceAttributes[c.CorrelationExtension] {
		p.Add("CorrelationExtension", "%q: use 1 to 20 lowercase letters and digits, not a CloudEvents attribute, such as %q",
			c.CorrelationExtension, defaultCorrelationExtension)
	}
	c.Types.validate(p)
	return p.Err()
}

// NewCloudEventsMarshaler returns the mapping of messages to CloudEvents
// 1.0 records, per the Kafka protocol binding: it writes binary content
// mode and reads binary and structured mode (the broker package doc lists
// what each attribute becomes). A record that is not a valid CloudEvent is
// read as a message marked with [koto.InvalidRecordMetadataKey].
func NewCloudEventsMarshaler(cfg CloudEventsConfig) (kafka.MarshalerUnmarshaler, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cloudEventsMarshaler{cfg: cfg, names: newWireNames(cfg.Types)}, nil
}

// The CloudEvents vocabulary of this mapping.
const (
	cePrefix           = "ce_"
	ceSpecVersion      = "1.0"
	ceStructuredType   = "application/cloudevents+json"
	ceBatchType        = "application/cloudevents-batch+json"
	ceJSONType         = "application/json"
	cePartitionKeyAttr = "partitionkey"
)

// ceAttributes are the context attributes of CloudEvents 1.0 and of the
// extensions this mapping translates; a correlation extension must not
// take their names.
var ceAttributes = map[string]bool{
	"specversion": true, "id": true, "source": true, "type": true, "time": true, "subject": true,
	"datacontenttype": true, "dataschema": true, "data": true, "data_base64": true,
	traceParentKey: true, traceStateKey: true, cePartitionKeyAttr: true,
}

type cloudEventsMarshaler struct {
	cfg   CloudEventsConfig
	names wireNames
}

// Marshal writes msg as a binary-mode CloudEvent. A message marked with
// [koto.InvalidRecordMetadataKey] (the dead letter of an invalid record) is
// written with its metadata as headers, as it was read.
func (m cloudEventsMarshaler) Marshal(topic string, msg *message.Message) (*sarama.ProducerMessage, error) {
	md := msg.Metadata
	rec := newRecord(topic, msg)
	var h headerList
	if _, invalid := md[koto.InvalidRecordMetadataKey]; invalid {
		h.addRest(md, func(string) bool { return false })
		rec.Headers = h
		return rec, nil
	}
	typ := cmp.Or(m.names.wire(md.Get(koto.TypeNameMetadataKey)), md.Get(cePrefix+"type"))
	if msg.UUID == "" || typ == "" {
		return nil, fmt.Errorf("broker: CloudEvents: message %q has no ID or no type name (metadata %q); a CloudEvent needs both", msg.UUID, koto.TypeNameMetadataKey)
	}
	h.add(cePrefix+"specversion", ceSpecVersion)
	h.add(cePrefix+"id", msg.UUID)
	h.add(cePrefix+"source", cmp.Or(md.Get(cePrefix+"source"), m.cfg.Source))
	h.add(cePrefix+"type", typ)
	h.add(cePrefix+"time", cmp.Or(md.Get(cePrefix+"time"), time.Now().UTC().Format(time.RFC3339Nano)))
	h.add(contentTypeKey, cmp.Or(md.Get(contentTypeKey), ceJSONType))
	h.add(cePrefix+m.cfg.CorrelationExtension, md.Get(correlation.MetadataKey))
	h.add(cePrefix+traceParentKey, md.Get(traceParentKey))
	h.add(cePrefix+traceStateKey, md.Get(traceStateKey))
	h.add(cePrefix+cePartitionKeyAttr, md.Get(koto.PartitionKeyMetadataKey))
	h.addRest(md, m.written)
	rec.Headers = h
	return rec, nil
}

// written reports whether Marshal has written the metadata entry key as an
// attribute already.
func (m cloudEventsMarshaler) written(key string) bool {
	switch key {
	case koto.TypeNameMetadataKey, contentTypeKey, correlation.MetadataKey, traceParentKey,
		traceStateKey, koto.PartitionKeyMetadataKey, kafka.UUIDHeaderKey:
		return true
	}
	attr, ok := strings.CutPrefix(key, cePrefix)
	return ok && (ceWritten[attr] || attr == m.cfg.CorrelationExtension)
}

// ceWritten are the attributes that Marshal writes from the message, and
// datacontenttype, which binary mode carries as content-type.
var ceWritten = map[string]bool{
	"specversion": true, "id": true, "source": true, "type": true, "time": true, "datacontenttype": true,
	traceParentKey: true, traceStateKey: true, cePartitionKeyAttr: true,
}

// newRecord returns the record of msg on topic without headers: its payload
// and, when it has a partition key, that key.
func newRecord(topic string, msg *message.Message) *sarama.ProducerMessage {
	rec := &sarama.ProducerMessage{Topic: topic, Value: sarama.ByteEncoder(msg.Payload)}
	if key := msg.Metadata.Get(koto.PartitionKeyMetadataKey); key != "" {
		rec.Key = sarama.StringEncoder(key)
	}
	return rec
}

// Unmarshal reads a binary- or structured-mode CloudEvent. It never fails:
// a record that is not a valid CloudEvent gives a message with the record's
// value and headers, marked with [koto.InvalidRecordMetadataKey], and a
// probe of Wolverine's one marked with [koto.ProbeMetadataKey].
func (m cloudEventsMarshaler) Unmarshal(rec *sarama.ConsumerMessage) (*message.Message, error) {
	md := recordHeaders(rec)
	if probe := probeOf(rec, md); probe != "" {
		msg := message.NewMessage(take(md, wolverineIDHeader), rec.Value)
		md.Set(koto.ProbeMetadataKey, probe)
		msg.Metadata = md
		return msg, nil
	}
	ev, err := readCloudEvent(rec, md)
	if err == nil {
		err = ev.validate()
	}
	if err != nil {
		return invalidRecord(rec, ev.attrs["id"], "CloudEvents: "+err.Error()), nil
	}
	id := take(ev.attrs, "id")
	msg := message.NewMessage(id, ev.data)
	if !m.cfg.DeduplicateByID {
		md.Set(koto.IdempotencyKeyMetadataKey, eventIdentity(ev.attrs["source"], id))
	}
	delete(md, koto.InvalidRecordMetadataKey)
	delete(ev.attrs, "specversion")
	md.Set(koto.TypeNameMetadataKey, m.names.name(take(ev.attrs, "type")))
	setIf(md, correlation.MetadataKey, take(ev.attrs, m.cfg.CorrelationExtension))
	setIf(md, traceParentKey, take(ev.attrs, traceParentKey))
	setIf(md, traceStateKey, take(ev.attrs, traceStateKey))
	setIf(md, koto.PartitionKeyMetadataKey, cmp.Or(string(rec.Key), take(ev.attrs, cePartitionKeyAttr)))
	delete(ev.attrs, cePartitionKeyAttr)
	for name, v := range ev.attrs {
		md.Set(cePrefix+name, v)
	}
	msg.Metadata = md
	return msg, nil
}

// eventIdentity is the idempotency key of the CloudEvent with source and
// id: the source, quoted, so that no other pair gives the same key, a
// space, and the id.
func eventIdentity(source, id string) string {
	return strconv.Quote(source) + " " + id
}

// invalidRecord returns the message of a record that its mapping cannot
// read, for reason: the record's value, its headers as metadata, its key as
// the partition key, and [koto.InvalidRecordMetadataKey].
func invalidRecord(rec *sarama.ConsumerMessage, id, reason string) *message.Message {
	msg := message.NewMessage(id, rec.Value)
	msg.Metadata = recordHeaders(rec)
	if len(rec.Key) > 0 && msg.Metadata.Get(koto.PartitionKeyMetadataKey) == "" {
		msg.Metadata.Set(koto.PartitionKeyMetadataKey, string(rec.Key))
	}
	msg.Metadata.Set(koto.InvalidRecordMetadataKey, reason)
	return msg
}

// setIf sets md[key] to a non-empty value.
func setIf(md message.Metadata, key, value string) {
	if value != "" {
		md.Set(key, value)
	}
}

// cloudEvent is a CloudEvent read from a record: its attributes, by name
// without the ce_ prefix (datacontenttype excepted: it is in the metadata
// as content-type), and its data.
type cloudEvent struct {
	attrs map[string]string
	data  []byte
}

// readCloudEvent reads the CloudEvent of rec, whose headers md holds, in
// the mode its headers say; it takes the attribute headers out of md and
// leaves content-type as the event's datacontenttype.
func readCloudEvent(rec *sarama.ConsumerMessage, md message.Metadata) (cloudEvent, error) {
	contentType := mediaType(md.Get(contentTypeKey))
	switch {
	case contentType == ceStructuredType:
		return readStructured(rec.Value, md)
	case contentType == ceBatchType:
		return cloudEvent{}, errors.New("batched CloudEvents (" + ceBatchType + ") are not supported; send one event per record")
	}
	ev := cloudEvent{attrs: map[string]string{}, data: rec.Value}
	for k, v := range md {
		if name, ok := strings.CutPrefix(strings.ToLower(k), cePrefix); ok {
			ev.attrs[name] = v
			delete(md, k)
		}
	}
	if _, ok := ev.attrs["specversion"]; ok {
		return ev, nil
	}
	if isJSON(contentType) && looksStructured(rec.Value) {
		// Structured without the binding's content type, as Wolverine's
		// CloudEvents interop writes it.
		return readStructured(rec.Value, md)
	}
	return ev, fmt.Errorf("not a CloudEvent: no %sspecversion header, and content-type %q is not %s", cePrefix, md.Get(contentTypeKey), ceStructuredType)
}

// looksStructured reports whether value may be a structured CloudEvent: a
// JSON object that names specversion.
func looksStructured(value []byte) bool {
	v := bytes.TrimLeft(value, " \t\r\n")
	return len(v) > 0 && v[0] == '{' && bytes.Contains(v, []byte(`"specversion"`))
}

// readStructured reads a structured-mode CloudEvent, a JSON object, and
// puts its datacontenttype in md.
func readStructured(value []byte, md message.Metadata) (cloudEvent, error) {
	ev := cloudEvent{attrs: map[string]string{}}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(value, &fields); err != nil {
		return ev, fmt.Errorf("structured CloudEvent is not a JSON object: %w", err)
	}
	for name, raw := range fields {
		if name == "data" || name == "data_base64" {
			continue
		}
		v, err := attributeValue(raw)
		if err != nil {
			return ev, fmt.Errorf("attribute %q: %w", name, err)
		}
		if v != "" {
			ev.attrs[name] = v
		}
	}
	contentType := take(ev.attrs, "datacontenttype")
	data, hasData := fields["data"]
	b64, hasB64 := fields["data_base64"]
	switch {
	case hasData && hasB64:
		return ev, errors.New("structured CloudEvent has both data and data_base64")
	case hasB64:
		var s string
		err := json.Unmarshal(b64, &s)
		if err == nil {
			ev.data, err = base64.StdEncoding.DecodeString(s)
		}
		if err != nil {
			return ev, fmt.Errorf("data_base64 is not a base64 string: %w", err)
		}
	case hasData && !isJSON(contentType) && len(data) > 0 && data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return ev, fmt.Errorf("data: %w", err)
		}
		ev.data = []byte(s)
	case hasData && !bytes.Equal(data, []byte("null")):
		ev.data = data
		contentType = cmp.Or(contentType, ceJSONType)
	}
	if contentType != "" {
		md.Set(contentTypeKey, contentType)
	} else {
		delete(md, contentTypeKey)
	}
	return ev, nil
}

// attributeValue returns the text of an attribute in a structured event: a
// string as it is, a number or boolean as written, null (an absent
// attribute) as "".
func attributeValue(raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case float64, bool:
		return string(raw), nil
	}
	return "", fmt.Errorf("is %s, not a string, number or boolean", raw)
}

// validate checks the required attributes of CloudEvents 1.0.
func (ev cloudEvent) validate() error {
	if v := ev.attrs["specversion"]; v != ceSpecVersion {
		return fmt.Errorf("specversion %q is not %s", v, ceSpecVersion)
	}
	var missing []string
	for _, name := range []string{"id", "source", "type"} {
		if ev.attrs[name] == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("required attribute missing or empty: %s", strings.Join(missing, ", "))
	}
	if t, ok := ev.attrs["time"]; ok {
		if _, err := time.Parse(time.RFC3339Nano, t); err != nil {
			return fmt.Errorf("time %q is not an RFC 3339 timestamp", t)
		}
	}
	return nil
}

// mediaType returns the media type of a content type, lower case, without
// parameters.
func mediaType(contentType string) string {
	t, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(t))
}

// isJSON reports whether a datacontenttype is JSON; an absent one is, in a
// structured event.
func isJSON(contentType string) bool {
	t := mediaType(contentType)
	return t == "" || t == ceJSONType || t == "text/json" || strings.HasSuffix(t, "+json")
}
