package broker_test

import (
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"

	"github.com/koto-dev/watermill-koto/broker"
)

// wolverinePing is the record of the ping envelope that a Wolverine sender
// writes when it recovers from a failed send, as its default Kafka mapper
// writes it: keyed by its id, the four bytes of Envelope.ForPing.
func wolverinePing(headers ...header) *sarama.ConsumerMessage {
	return record(wolverineID, "\x01\x02\x03\x04", append([]header{
		{"id", wolverineID}, {"message-type", "wolverine-ping"}, {"content-type", "wolverine/ping"},
		{"source", "orders-api"}, {"sent-at", "2026-03-04 05:06:07:123456 Z"},
	}, headers...)...)
}

// TestMappingsMarkWolverineProbes: the Wolverine and CloudEvents mappings
// mark Wolverine's ping envelope, also in its raw-JSON mapper's form (the
// message-type header alone), and the record of its resources check (key
// and value "ping", no header) with koto.ProbeMetadataKey; records that
// only look like them, and a producer's own header of that name, are not
// probes. Watermill's mapping marks nothing.
func TestMappingsMarkWolverineProbes(t *testing.T) {
	mappings := map[string]kafka.MarshalerUnmarshaler{
		"Wolverine":   newWolverine(t),
		"CloudEvents": newCloudEvents(t, broker.CloudEventsConfig{Source: "/payments"}),
	}
	probes := map[string]struct {
		rec  *sarama.ConsumerMessage
		want string
	}{
		"ping envelope":             {wolverinePing(), "wolverine-ping"},
		"ping of the raw-JSON form": {record("k", "\x01\x02\x03\x04", header{"message-type", "wolverine-ping"}), "wolverine-ping"},
		"resources check":           {record("ping", "ping"), "wolverine-resources-check"},
		"ping value with a header":  {record("ping", "ping", header{"message-type", "Shop.Ping"}), ""},
		"ping value without key":    {record("", "ping"), ""},
		"another type":              {record(wolverineID, "{}", header{"id", wolverineID}, header{"message-type", "wolverine-pong"}), ""},
		"the producer's own mark":   {record(wolverineID, "{}", header{"id", wolverineID}, header{koto.ProbeMetadataKey, "x"}), ""},
	}
	for mapping, m := range mappings {
		for name, p := range probes {
			msg, err := m.Unmarshal(p.rec)
			if err != nil {
				t.Fatalf("%s, %s: Unmarshal: %v", mapping, name, err)
			}
			if got := msg.Metadata.Get(koto.ProbeMetadataKey); got != p.want {
				t.Errorf("%s mapping, %s: probe %q, want %q", mapping, name, got, p.want)
			}
		}
	}
	for name, p := range probes {
		msg, err := broker.NewPartitionKeyMarshaler().Unmarshal(p.rec)
		if err != nil {
			t.Fatalf("Watermill, %s: Unmarshal: %v", name, err)
		}
		if got, ok := msg.Metadata[koto.ProbeMetadataKey]; ok {
			t.Errorf("Watermill mapping, %s: probe %q, want none", name, got)
		}
	}
}
