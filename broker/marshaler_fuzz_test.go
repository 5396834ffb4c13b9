package broker_test

import (
	"bytes"
	"maps"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"

	"github.com/koto-dev/watermill-koto/broker"
)

// fuzzHeaders splits raw into record headers: each line is one header,
// "key=value" or a bare key. Lines may hold any bytes, invalid UTF-8 and
// NULs included, and keys may repeat.
func fuzzHeaders(raw []byte) []*sarama.RecordHeader {
	var hs []*sarama.RecordHeader
	for line := range bytes.SplitSeq(raw, []byte("\n")) {
		k, v, _ := bytes.Cut(line, []byte("="))
		hs = append(hs, &sarama.RecordHeader{Key: k, Value: v})
	}
	return hs
}

// FuzzPartitionKeyMarshalerUnmarshal feeds the marshaler records as any
// producer could write them. Unmarshal never fails or panics, the UUID
// header becomes the UUID and every other header (the last of equal keys)
// the metadata, a record key without a partition_key header becomes one,
// and marshalling the message again gives a record that unmarshals to the
// same message: a consumer can dead-letter or republish whatever it read.
func FuzzPartitionKeyMarshalerUnmarshal(f *testing.F) {
	f.Add([]byte("_watermill_message_uuid=0190c5a4-9d7e-7000-8000-00000000002a\nname=order-placed"), []byte("order-7"), []byte(`{"id":7}`))
	f.Add([]byte("partition_key=a\npartition_key=b"), []byte("k"), []byte{})
	f.Add([]byte("partition_key=\n_watermill_message_uuid="), []byte("k"), []byte{0, 1, 2})
	f.Add([]byte("\xff\xfe=\x00\xc3\x28\n=\n=empty-key"), []byte(nil), []byte("\xff"))
	f.Add([]byte("_watermill_message_uuid=a\n_watermill_message_uuid=b\ncorrelation_id=\xed\xa0\x80"), []byte{}, []byte(nil))
	f.Add(bytes.Repeat([]byte("h=v\n"), 2000), []byte("k"), []byte("x"))
	f.Fuzz(func(t *testing.T, headers, key, value []byte) {
		m := broker.NewPartitionKeyMarshaler()
		rec := &sarama.ConsumerMessage{Topic: "t", Key: key, Value: value, Headers: fuzzHeaders(headers)}
		msg, err := m.Unmarshal(rec)
		if err != nil {
			t.Fatalf("Unmarshal(%q) failed: %v; any record must decode", headers, err)
		}
		wantUUID, wantMD := "", map[string]string{}
		for _, h := range rec.Headers {
			if string(h.Key) == kafka.UUIDHeaderKey {
				wantUUID = string(h.Value)
			} else {
				wantMD[string(h.Key)] = string(h.Value)
			}
		}
		if len(key) > 0 && wantMD[koto.PartitionKeyMetadataKey] == "" {
			wantMD[koto.PartitionKeyMetadataKey] = string(key)
		}
		if msg.UUID != wantUUID || !maps.Equal(map[string]string(msg.Metadata), wantMD) || !bytes.Equal(msg.Payload, value) {
			t.Fatalf("Unmarshal(%q, key %q) = uuid %q metadata %q; want uuid %q metadata %q",
				headers, key, msg.UUID, msg.Metadata, wantUUID, wantMD)
		}

		out, err := m.Marshal("t", msg)
		if err != nil {
			t.Fatalf("Marshal of an unmarshalled record failed: %v", err)
		}
		again, err := m.Unmarshal(consumed(t, out))
		if err != nil {
			t.Fatalf("Unmarshal of a marshalled message failed: %v", err)
		}
		if again.UUID != msg.UUID || !maps.Equal(again.Metadata, msg.Metadata) || !bytes.Equal(again.Payload, msg.Payload) {
			t.Fatalf("round trip changed the message: uuid %q→%q metadata %q→%q", msg.UUID, again.UUID, msg.Metadata, again.Metadata)
		}
	})
}

// consumed turns a produced record into the record a consumer reads.
func consumed(t testing.TB, p *sarama.ProducerMessage) *sarama.ConsumerMessage {
	t.Helper()
	rec := &sarama.ConsumerMessage{Topic: p.Topic}
	var err error
	if p.Key != nil {
		if rec.Key, err = p.Key.Encode(); err != nil {
			t.Fatalf("encoding the key: %v", err)
		}
	}
	if p.Value != nil {
		if rec.Value, err = p.Value.Encode(); err != nil {
			t.Fatalf("encoding the value: %v", err)
		}
	}
	for _, h := range p.Headers {
		rec.Headers = append(rec.Headers, &h)
	}
	return rec
}

// FuzzRecordMappings feeds the CloudEvents and Wolverine mappings records
// as any producer could write them, binary or structured. Unmarshal never
// fails or panics, and whatever it read, valid or marked invalid, can be
// written again and read back with the same ID and payload, so that a
// consumer can always dead-letter it.
func FuzzRecordMappings(f *testing.F) {
	f.Add([]byte("ce_specversion=1.0\nce_id=1\nce_source=/o\nce_type=t\ncontent-type=application/json"), []byte("k"), []byte(`{}`))
	f.Add([]byte("content-type=application/cloudevents+json"), []byte(nil), []byte(`{"specversion":"1.0","id":"1","source":"/o","type":"t","data_base64":"AA=="}`))
	f.Add([]byte("CE_SPECVERSION=0.3\nce_time=x"), []byte("k"), []byte{0xff})
	f.Add([]byte("id=5b1c3e1a-2f4d-4c6e-9a8b-7d6e5f4a3b2c\nmessage-type=A.B\nparent-id=00-x\nkoto_invalid_record="), []byte("k"), []byte("{}"))
	ce, err := broker.NewCloudEventsMarshaler(broker.CloudEventsConfig{Source: "/fuzz", Types: broker.TypeNames{Prefix: "com.example."}})
	if err != nil {
		f.Fatal(err)
	}
	wolverine, err := broker.NewWolverineMarshaler(broker.WolverineConfig{Source: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, headers, key, value []byte) {
		for name, m := range map[string]kafka.MarshalerUnmarshaler{"CloudEvents": ce, "Wolverine": wolverine} {
			rec := &sarama.ConsumerMessage{Topic: "t", Key: key, Value: value, Headers: fuzzHeaders(headers)}
			msg, err := m.Unmarshal(rec)
			if err != nil {
				t.Fatalf("%s: Unmarshal(%q) failed: %v; any record must decode", name, headers, err)
			}
			out, err := m.Marshal("t", msg)
			if err != nil {
				t.Fatalf("%s: Marshal of an unmarshalled record failed: %v", name, err)
			}
			again, err := m.Unmarshal(consumed(t, out))
			if err != nil || !bytes.Equal(again.Payload, msg.Payload) {
				t.Fatalf("%s: read back: %v, payload %q, want %q", name, err, again.Payload, msg.Payload)
			}
		}
	})
}
