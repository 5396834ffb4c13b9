package broker_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/internal/kafkatest"
	"github.com/koto-dev/watermill-koto/topics"
)

func TestProvisionTopicsCreatesAndIsIdempotent(t *testing.T) {
	ctx := testContext(t)
	brokers := kafkatest.Brokers(t)
	cfg := broker.ProvisionConfig{Brokers: brokers, Partitions: 5}
	a, b := kafkatest.Topic(t, "prov-a"), kafkatest.Topic(t, "prov-b")
	for i := range 2 {
		if err := broker.ProvisionTopics(ctx, cfg, a, b, a); err != nil {
			t.Fatalf("ProvisionTopics call %d: %v", i+1, err)
		}
	}
	details, err := newAdmin(t, brokers).ListTopics(ctx, a, b)
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	for _, name := range []string{a, b} {
		if d := details[name]; d.Err != nil || len(d.Partitions) != 5 {
			t.Errorf("topic %s: err %v, %d partitions, want 5", name, d.Err, len(d.Partitions))
		}
	}
}

func TestProvisionTopicsLeavesExistingTopicAlone(t *testing.T) {
	ctx := testContext(t)
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, "prov-existing")
	if err := broker.ProvisionTopics(ctx, broker.ProvisionConfig{Brokers: brokers, Partitions: 2}, topic); err != nil {
		t.Fatalf("first ProvisionTopics: %v", err)
	}
	if err := broker.ProvisionTopics(ctx, broker.ProvisionConfig{Brokers: brokers, Partitions: 6}, topic); err != nil {
		t.Fatalf("second ProvisionTopics: %v", err)
	}
	details, err := newAdmin(t, brokers).ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	if n := len(details[topic].Partitions); n != 2 {
		t.Fatalf("topic has %d partitions, want the original 2", n)
	}
}

func TestProvisionTopicsConcurrently(t *testing.T) {
	ctx := testContext(t)
	brokers := kafkatest.Brokers(t)
	names := []string{kafkatest.Topic(t, "race-a"), kafkatest.Topic(t, "race-b"), kafkatest.Topic(t, "race-c")}
	const callers = 8
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			errs[i] = broker.ProvisionTopics(ctx, broker.ProvisionConfig{Brokers: brokers}, names...)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent ProvisionTopics: %v", err)
	}
	details, err := newAdmin(t, brokers).ListTopics(ctx, names...)
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	for _, name := range names {
		if d := details[name]; d.Err != nil || len(d.Partitions) != broker.DefaultPartitions {
			t.Errorf("topic %s: err %v, %d partitions, want %d", name, d.Err, len(d.Partitions), broker.DefaultPartitions)
		}
	}
}

// TestProvisionTopicsRejectsInvalidNameBeforeConnecting points at a port
// nothing listens on: the error must be about the name, not the connection.
func TestProvisionTopicsRejectsInvalidNameBeforeConnecting(t *testing.T) {
	cfg := broker.ProvisionConfig{Brokers: []string{"127.0.0.1:1"}}
	err := broker.ProvisionTopics(testContext(t), cfg, "fine", "bad topic!")
	if !errors.Is(err, broker.ErrInvalidTopic) || !errors.Is(err, topics.ErrInvalid) {
		t.Fatalf("error %v, want one wrapping ErrInvalidTopic and topics.ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), `"bad topic!"`) {
		t.Fatalf("error %q does not name the topic", err)
	}
}

func TestProvisionTopicsRejectsBadConfig(t *testing.T) {
	tests := map[string]struct {
		cfg  broker.ProvisionConfig
		want error
	}{
		"no brokers":           {broker.ProvisionConfig{}, broker.ErrNoBrokers},
		"negative partitions":  {broker.ProvisionConfig{Brokers: []string{"127.0.0.1:1"}, Partitions: -1}, broker.ErrInvalidConfig},
		"negative replication": {broker.ProvisionConfig{Brokers: []string{"127.0.0.1:1"}, ReplicationFactor: -3}, broker.ErrInvalidConfig},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if err := broker.ProvisionTopics(testContext(t), tt.cfg, "t"); !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want one wrapping %v", err, tt.want)
			}
		})
	}
}

func TestProvisionTopicsReportsBrokerRejection(t *testing.T) {
	if kafkatest.FromEnv() != nil {
		t.Skip("replication factor 3 may be valid on the external cluster")
	}
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.Topic(t, "prov-rf")
	err := broker.ProvisionTopics(testContext(t), broker.ProvisionConfig{Brokers: brokers, ReplicationFactor: 3}, topic)
	if err == nil || !strings.Contains(err.Error(), topic) {
		t.Fatalf("replication factor 3 on one broker: error %v, want one naming %s", err, topic)
	}
}
