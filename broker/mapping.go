package broker

import (
	"maps"
	"slices"
	"strings"

	"github.com/koto-dev/watermill-koto/internal/config"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
)

// TypeNames maps the type names of this library ("order-placed") to the
// names on the wire (CloudEvents' type, Wolverine's message-type) and
// back. The zero value keeps the names as they are.
type TypeNames struct {
	// Prefix goes before every type name without an entry in Names on the
	// wire, and is taken off the wire names that start with it: with
	// "com.example.shop.", "order-placed" is "com.example.shop.order-placed",
	// a reverse-DNS CloudEvents type.
	Prefix string
	// Names gives types their wire name, such as the .NET type's full
	// name that Wolverine writes by default, "Shop.Contracts.OrderPlaced",
	// or the alias of its MessageIdentity attribute. Each wire name must
	// be given to one type only.
	Names map[string]string
}

// validate checks that the wire names can be read back.
func (n TypeNames) validate(p *config.Problems) {
	seen := make(map[string]string, len(n.Names))
	for name, wire := range n.Names {
		switch other, dup := seen[wire]; {
		case name == "" || wire == "":
			p.Add("Types.Names", "%q maps to %q; neither may be empty", name, wire)
		case dup:
			p.Add("Types.Names", "%q and %q both map to %q; give each type its own wire name", name, other, wire)
		}
		seen[wire] = name
	}
}

// Metadata keys the record mappings translate besides koto's.
const (
	// contentTypeKey holds the media type of the payload, such as
	// "application/json".
	contentTypeKey = "content-type"
	// traceParentKey and traceStateKey hold the W3C trace context, as
	// OpenTelemetry's TraceContext propagator writes it.
	traceParentKey = "traceparent"
	traceStateKey  = "tracestate"
)

// reversed returns the table from wire names back to type names.
func (n TypeNames) reversed() map[string]string {
	r := make(map[string]string, len(n.Names))
	for name, wire := range n.Names {
		r[wire] = name
	}
	return r
}

// wireNames translates type names with a [TypeNames] and its reversal.
type wireNames struct {
	TypeNames
	fromWire map[string]string
}

func newWireNames(n TypeNames) wireNames {
	return wireNames{TypeNames: n, fromWire: n.reversed()}
}

// wire returns the wire name of a type name; "" stays "".
func (w wireNames) wire(name string) string {
	if wire, ok := w.Names[name]; ok {
		return wire
	}
	if name == "" {
		return ""
	}
	return w.Prefix + name
}

// name returns the type name of a wire name; a wire name the table does not
// know stays as it is.
func (w wireNames) name(wire string) string {
	if name, ok := w.fromWire[wire]; ok {
		return name
	}
	if w.Prefix != "" && len(wire) > len(w.Prefix) && strings.HasPrefix(wire, w.Prefix) {
		return wire[len(w.Prefix):]
	}
	return wire
}

// recordHeaders returns the headers of rec as metadata, the last of equal
// keys winning, as watermill-kafka's marshaler reads them, without the
// keys that only the mapping reading a record sets ([readerOnly]).
func recordHeaders(rec *sarama.ConsumerMessage) message.Metadata {
	md := make(message.Metadata, len(rec.Headers)+2)
	for _, h := range rec.Headers {
		if h != nil && !readerOnly(string(h.Key)) {
			md[string(h.Key)] = string(h.Value)
		}
	}
	return md
}

// take returns md[key] and deletes it.
func take(md message.Metadata, key string) string {
	v := md[key]
	delete(md, key)
	return v
}

// headerList is the headers of a record being written.
type headerList []sarama.RecordHeader

// add appends a header unless value is empty.
func (h *headerList) add(key, value string) {
	if value != "" {
		*h = append(*h, sarama.RecordHeader{Key: []byte(key), Value: []byte(value)})
	}
}

// addRest appends the entries of md, whatever they hold, in a stable
// order, except those whose keys skip names and those of the message as
// read ([readerOnly]).
func (h *headerList) addRest(md message.Metadata, skip func(key string) bool) {
	for _, k := range slices.Sorted(maps.Keys(md)) {
		if !skip(k) && !readerOnly(k) {
			*h = append(*h, sarama.RecordHeader{Key: []byte(k), Value: []byte(md[k])})
		}
	}
}
