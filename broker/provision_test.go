package broker_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

func TestProvisionTopicsCreatesAndIsIdempotent(t *testing.T) {
	ctx := kototest.Context(t)
	brokers := kototest.Brokers(t)
	cfg := provisionCfg(brokers, 5)
	cfg.Provision.TopicConfigs = map[string]string{"retention.ms": "3600000"}
	a, b := kototest.Topic(t, "prov-a"), kototest.Topic(t, "prov-b")
	for i := range 2 {
		if err := broker.ProvisionTopics(ctx, cfg, a, b, a); err != nil {
			t.Fatalf("ProvisionTopics call %d: %v", i+1, err)
		}
	}
	adm := kototest.Admin(t, brokers)
	details, err := adm.ListTopics(ctx, a, b)
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	for _, name := range []string{a, b} {
		if d := details[name]; d.Err != nil || len(d.Partitions) != 5 {
			t.Errorf("topic %s: err %v, %d partitions, want 5", name, d.Err, len(d.Partitions))
		}
	}
	configs, err := adm.DescribeTopicConfigs(ctx, a)
	if err != nil {
		t.Fatalf("DescribeTopicConfigs: %v", err)
	}
	c, err := configs.On(a, nil)
	if err != nil {
		t.Fatalf("configs of %s: %v", a, err)
	}
	if v := c.Configs; !hasConfig(c.Configs, "retention.ms", "3600000") {
		t.Errorf("topic %s configs %v, want retention.ms=3600000", a, v)
	}
}

func TestProvisionTopicsLeavesExistingTopicAlone(t *testing.T) {
	ctx := kototest.Context(t)
	brokers := kototest.Brokers(t)
	topic := kototest.Topic(t, "prov-existing")
	if err := broker.ProvisionTopics(ctx, provisionCfg(brokers, 2), topic); err != nil {
		t.Fatalf("first ProvisionTopics: %v", err)
	}
	if err := broker.ProvisionTopics(ctx, provisionCfg(brokers, 6), topic); err != nil {
		t.Fatalf("second ProvisionTopics: %v", err)
	}
	details, err := kototest.Admin(t, brokers).ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	if n := len(details[topic].Partitions); n != 2 {
		t.Fatalf("topic has %d partitions, want the original 2", n)
	}
}

func TestProvisionTopicsConcurrently(t *testing.T) {
	ctx := kototest.Context(t)
	brokers := kototest.Brokers(t)
	names := []string{kototest.Topic(t, "race-a"), kototest.Topic(t, "race-b"), kototest.Topic(t, "race-c")}
	const callers = 8
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			errs[i] = broker.ProvisionTopics(ctx, broker.Config{Brokers: brokers}, names...)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent ProvisionTopics: %v", err)
	}
	details, err := kototest.Admin(t, brokers).ListTopics(ctx, names...)
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
	cfg := broker.Config{Brokers: []string{"127.0.0.1:1"}}
	err := broker.ProvisionTopics(kototest.Context(t), cfg, "fine", "bad topic!")
	if !errors.Is(err, topics.ErrInvalid) {
		t.Fatalf("error %v, want one wrapping topics.ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), `"bad topic!"`) {
		t.Fatalf("error %q does not name the topic", err)
	}
}

func TestProvisionTopicsRejectsBadConfig(t *testing.T) {
	tests := map[string]struct {
		cfg   broker.Config
		field string
	}{
		"no brokers":            {broker.Config{}, "broker.Config.Brokers"},
		"negative partitions":   {provisionCfg([]string{"127.0.0.1:1"}, -1), "broker.Config.Provision.Partitions"},
		"negative replication":  {broker.Config{Brokers: []string{"127.0.0.1:1"}, Provision: broker.ProvisionConfig{ReplicationFactor: -3}}, "broker.Config.Provision.ReplicationFactor"},
		"SASL without password": {broker.Config{Brokers: []string{"127.0.0.1:1"}, SASL: broker.SASLConfig{User: "u"}}, "broker.Config.SASL.Password"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := broker.ProvisionTopics(kototest.Context(t), tt.cfg, "t")
			assertConfigErr(t, "ProvisionTopics", err, tt.field)
		})
	}
}

func TestProvisionTopicsReportsBrokerRejection(t *testing.T) {
	if kototest.FromEnv() != nil {
		t.Skip("replication factor 3 may be valid on the external cluster")
	}
	brokers := kototest.Brokers(t)
	topic := kototest.Topic(t, "prov-rf")
	cfg := broker.Config{Brokers: brokers, Provision: broker.ProvisionConfig{ReplicationFactor: 3}}
	err := broker.ProvisionTopics(kototest.Context(t), cfg, topic)
	if err == nil || !strings.Contains(err.Error(), topic) {
		t.Fatalf("replication factor 3 on one broker: error %v, want one naming %s", err, topic)
	}
}

func hasConfig(configs []kadm.Config, key, value string) bool {
	for _, c := range configs {
		if c.Key == key && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}
