package offsets_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/internal/offsets"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestReader reads back what a test wrote and committed: the spans of a
// topic, the group that committed on it and its offsets.
func TestReader(t *testing.T) {
	cfg := broker.Config{Brokers: kototest.Brokers(t)}
	topic := kototest.NewTopic(t, cfg, "spans")
	pub := kototest.NewPublisher(t, cfg)
	for range 5 {
		if err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), []byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	group := kototest.Group(t, "lagging")
	adm := kototest.Admin(t, cfg.Brokers)
	var commit kadm.Offsets
	commit.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(kototest.Context(t), group, commit); err != nil {
		t.Fatal(err)
	}

	r := newReader(t, cfg)
	spans, err := r.Spans([]string{topic, kototest.Topic(t, "missing")})
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 1 || len(spans[topic]) == 0 {
		t.Fatalf("spans: %v, want the partitions of %s alone", spans, topic)
	}
	var records int64
	for _, p := range spans[topic] {
		records += p.End - p.Start
	}
	if records != 5 {
		t.Errorf("spans of %s hold %d records, want 5: %v", topic, records, spans[topic])
	}

	committed, err := r.Committed(group)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := committed[topic][0]; !ok || got != 0 || len(committed) != 1 {
		t.Errorf("committed: %v, want %s partition 0 at 0", committed, topic)
	}
	if none, err := r.Committed(kototest.Group(t, "never")); err != nil || len(none) != 0 {
		t.Errorf("a group that never committed: %v, %v", none, err)
	}

	groups, err := r.Groups()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range groups {
		found = found || (g.Name == group && g.Members == 0)
	}
	if !found {
		t.Errorf("groups %v lack %s with no members", groups, group)
	}
	topics, err := r.Topics()
	if err != nil {
		t.Fatal(err)
	}
	found = false
	for _, tp := range topics {
		found = found || tp == topic
	}
	if !found {
		t.Errorf("topics %v lack %s", topics, topic)
	}
}

func newReader(t *testing.T, cfg broker.Config) *offsets.Reader {
	t.Helper()
	client, err := broker.NewSaramaClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := offsets.NewReader(client)
	if err != nil {
		_ = client.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}
