package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/topics"
)

// Defaults applied to the zero values of [ProvisionConfig].
const (
	// DefaultPartitions is the partition count of provisioned topics.
	DefaultPartitions = 3
	// DefaultReplicationFactor is the replication factor of provisioned
	// topics. 1 suits a single development broker; production clusters
	// want 3, so that a topic survives the loss of a broker.
	DefaultReplicationFactor = 1
)

// ProvisionConfig configures [ProvisionTopics].
type ProvisionConfig struct {
	// Brokers are the bootstrap addresses, host:port. Required.
	Brokers []string

	// ClientID names this client to Kafka. Default: DefaultClientID.
	ClientID string

	// Partitions of each new topic. Default: DefaultPartitions.
	Partitions int32

	// ReplicationFactor of each new topic. Default: DefaultReplicationFactor
	// (1); set 3 in production.
	ReplicationFactor int16

	// TopicConfigs are Kafka topic configs for new topics, such as
	// {"retention.ms": "604800000"}. Optional.
	TopicConfigs map[string]string
}

func (c *ProvisionConfig) setDefaults() {
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = DefaultReplicationFactor
	}
}

// Validate reports the first field that cannot be used, zero values
// counting as their defaults. ProvisionTopics calls it.
func (c ProvisionConfig) Validate() error {
	if err := validateBrokers("ProvisionConfig.Brokers", c.Brokers); err != nil {
		return err
	}
	if c.Partitions < 0 {
		return fmt.Errorf("%w: ProvisionConfig.Partitions is %d; use 1 or more (0 means %d)", ErrInvalidConfig, c.Partitions, DefaultPartitions)
	}
	if c.ReplicationFactor < 0 {
		return fmt.Errorf("%w: ProvisionConfig.ReplicationFactor is %d; use 1 or more (0 means %d, production wants 3)",
			ErrInvalidConfig, c.ReplicationFactor, DefaultReplicationFactor)
	}
	return nil
}

// ProvisionTopics creates those of the topics that do not exist yet, with
// cfg's partitions, replication factor and configs, and waits until Kafka
// reports each of them with a leader for every partition. Existing topics
// are left exactly as they are, even if their settings differ from cfg.
//
// It is safe to call from many instances at once: a topic that another
// caller created first counts as success. Every name is checked against
// Kafka's naming rules before anything is sent to Kafka; an invalid one
// fails the whole call with an error that wraps ErrInvalidTopic and names
// the topic and the rule it breaks.
func ProvisionTopics(ctx context.Context, cfg ProvisionConfig, names ...string) error {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := validateTopics(names); err != nil {
		return err
	}
	names = unique(names)
	if len(names) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ClientID(cfg.ClientID))
	if err != nil {
		return fmt.Errorf("broker: provision topics: Kafka client for %v: %w", cfg.Brokers, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := createTopics(ctx, adm, cfg, names); err != nil {
		return err
	}
	return waitForTopics(ctx, adm, names)
}

// ValidateTopic checks name against Kafka's topic naming rules and returns
// an error wrapping ErrInvalidTopic (and topics.ErrInvalid) that names the
// topic and the rule it breaks.
func ValidateTopic(name string) error {
	if err := topics.Validate(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTopic, err)
	}
	return nil
}

func validateTopics(names []string) error {
	for _, name := range names {
		if err := ValidateTopic(name); err != nil {
			return err
		}
	}
	return nil
}

// createTopics asks Kafka to create every topic; TOPIC_ALREADY_EXISTS is
// success.
func createTopics(ctx context.Context, adm *kadm.Client, cfg ProvisionConfig, names []string) error {
	resps, err := adm.CreateTopics(ctx, cfg.Partitions, cfg.ReplicationFactor, topicConfigs(cfg.TopicConfigs), names...)
	if err != nil {
		return fmt.Errorf("broker: create topics %v on %v: %w", names, cfg.Brokers, err)
	}
	var errs []error
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			errs = append(errs, fmt.Errorf("broker: create topic %q (%d partitions, replication factor %d): %w%s",
				r.Topic, cfg.Partitions, cfg.ReplicationFactor, r.Err, detail(r.ErrMessage)))
		}
	}
	return errors.Join(errs...)
}

// unique drops repeated names, which Kafka would reject as an invalid
// request.
func unique(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := make([]string, 0, len(names))
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func detail(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

func topicConfigs(in map[string]string) map[string]*string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]*string, len(in))
	for k, v := range in {
		out[k] = kadm.StringPtr(v)
	}
	return out
}

// topicPollInterval paces waitForTopics while a new topic propagates through
// a multi-broker cluster.
const topicPollInterval = 100 * time.Millisecond

// waitForTopics polls metadata until every topic has a leader for each of
// its partitions, or ctx ends.
func waitForTopics(ctx context.Context, adm *kadm.Client, names []string) error {
	tick := time.NewTicker(topicPollInterval)
	defer tick.Stop()
	for {
		pending, err := topicsNotReady(ctx, adm, names)
		if err == nil && len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker: topics %v not ready (last error: %v): %w", pending, err, ctx.Err())
		case <-tick.C:
		}
	}
}

func topicsNotReady(ctx context.Context, adm *kadm.Client, names []string) ([]string, error) {
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return names, err
	}
	var pending []string
	for _, name := range names {
		if !ready(details[name]) {
			pending = append(pending, name)
		}
	}
	return pending, nil
}

func ready(d kadm.TopicDetail) bool {
	if d.Err != nil || len(d.Partitions) == 0 {
		return false
	}
	for _, p := range d.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}
