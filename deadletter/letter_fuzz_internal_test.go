package deadletter

import (
	"bytes"
	"errors"
	"strconv"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/internal/dlqmeta"
)

// rejectingUnmarshaler is a service's marshaler that refuses every record,
// so that newLetter falls back to the raw headers.
type rejectingUnmarshaler struct{}

func (rejectingUnmarshaler) Unmarshal(*sarama.ConsumerMessage) (*message.Message, error) {
	return nil, errors.New("not my format")
}

// FuzzNewLetter reads dead-letter records as any producer could write
// them: headers of any bytes, repeated keys, numbers and times that do not
// parse, through the services' marshaler or one that refuses the record.
// A letter always comes out, with its position, payload and every header;
// the failure fields are the metadata's, a number that does not parse (or
// is negative) reads as -1 (Attempts as 0), and a time that does not parse
// as zero.
func FuzzNewLetter(f *testing.F) {
	f.Add([]byte("_watermill_message_uuid=u1\ndead_letter_reason=boom\ndead_letter_original_partition=3\ndead_letter_original_offset=42\ndead_letter_attempts=2\ndead_letter_failed_at=2026-03-01T12:00:00.5Z"), []byte("k"), false)
	f.Add([]byte("dead_letter_original_partition=-1\ndead_letter_original_offset=99999999999999999999\ndead_letter_attempts=x"), []byte(nil), true)
	f.Add([]byte("dead_letter_original_partition=2147483648\ndead_letter_failed_at=yesterday"), []byte{}, false)
	f.Add([]byte("\xff=\xfe\n=\n_watermill_message_uuid=\x00"), []byte("\xff"), true)
	f.Add([]byte("dead_letter_reason=a\ndead_letter_reason=b\ndead_letter_attempts=+7"), []byte("k"), false)
	f.Fuzz(func(t *testing.T, headers, key []byte, reject bool) {
		rec := &sarama.ConsumerMessage{Partition: 1, Offset: 5, Key: key, Value: []byte("payload")}
		for line := range bytes.SplitSeq(headers, []byte("\n")) {
			k, v, _ := bytes.Cut(line, []byte("="))
			rec.Headers = append(rec.Headers, &sarama.RecordHeader{Key: k, Value: v})
		}
		var configured kafka.Unmarshaler
		if reject {
			configured = rejectingUnmarshaler{}
		}
		r, err := broker.NewMappingReader(broker.MappingWatermill, configured)
		if err != nil {
			t.Fatal(err)
		}
		l := newLetter(rec, r)

		if l.Partition != 1 || l.Offset != 5 || string(l.Payload) != "payload" || len(l.headers) != len(rec.Headers) {
			t.Fatalf("letter lost its record: partition %d offset %d payload %q headers %d of %d",
				l.Partition, l.Offset, l.Payload, len(l.headers), len(rec.Headers))
		}
		wantUUID := ""
		for _, h := range rec.Headers {
			if string(h.Key) == kafka.UUIDHeaderKey {
				wantUUID = string(h.Value)
				continue
			}
			want := lastValue(rec, h.Key)
			if got := l.Metadata.Get(string(h.Key)); got != want && !(string(h.Key) == koto.PartitionKeyMetadataKey && want == "" && got == string(key)) {
				t.Fatalf("metadata %q = %q, want the header's %q", h.Key, got, want)
			}
		}
		if l.UUID != wantUUID {
			t.Fatalf("UUID %q, want %q", l.UUID, wantUUID)
		}
		md := l.Metadata
		if l.Reason != md.Get(dlqmeta.Reason) || l.OriginalTopic != md.Get(dlqmeta.OriginalTopic) {
			t.Fatalf("reason %q topic %q differ from the metadata %q", l.Reason, l.OriginalTopic, md)
		}
		if want := number(md.Get(dlqmeta.OriginalPartition), 32); int64(l.OriginalPartition) != want {
			t.Fatalf("original partition %d from %q, want %d", l.OriginalPartition, md.Get(dlqmeta.OriginalPartition), want)
		}
		if want := number(md.Get(dlqmeta.OriginalOffset), 64); l.OriginalOffset != want {
			t.Fatalf("original offset %d from %q, want %d", l.OriginalOffset, md.Get(dlqmeta.OriginalOffset), want)
		}
		if want := max(number(md.Get(dlqmeta.Attempts), 32), 0); int64(l.Attempts) != want {
			t.Fatalf("attempts %d from %q, want %d", l.Attempts, md.Get(dlqmeta.Attempts), want)
		}
		ts, err := time.Parse(time.RFC3339Nano, md.Get(dlqmeta.FailedAt))
		if err == nil && !l.FailedAt.Equal(ts) || err != nil && !l.FailedAt.IsZero() {
			t.Fatalf("failed at %v from %q", l.FailedAt, md.Get(dlqmeta.FailedAt))
		}
		if !l.FailedAt.IsZero() && !l.FailedAtOrTimestamp().Equal(l.FailedAt) {
			t.Fatalf("FailedAtOrTimestamp %v, want FailedAt %v", l.FailedAtOrTimestamp(), l.FailedAt)
		}
	})
}

// lastValue is the value of the last header of rec named key: the one
// the metadata keeps.
func lastValue(rec *sarama.ConsumerMessage, key []byte) string {
	v := ""
	for _, h := range rec.Headers {
		if bytes.Equal(h.Key, key) {
			v = string(h.Value)
		}
	}
	return v
}

// number is a non-negative decimal of bits bits, or -1.
func number(s string, bits int) int64 {
	for i, c := range s {
		if (c < '0' || c > '9') && !(i == 0 && c == '+') {
			return -1
		}
	}
	n, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		return -1
	}
	return n
}
