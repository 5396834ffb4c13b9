package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/koto-dev/watermill-koto/internal/config"
	"github.com/koto-dev/watermill-koto/topics"
)

// provisionTimeout bounds a SubscribeInitialize, which takes no context.
const provisionTimeout = 30 * time.Second

// Defaults applied to the zero values of [ProvisionConfig].
const (
	// DefaultPartitions is the partition count of provisioned topics, and
	// of the topics the embedded broker creates.
	DefaultPartitions = 3
	// defaultReplicationFactor is the replication factor of provisioned
	// topics. 1 suits a single development broker; production clusters
	// want 3, so that a topic survives the loss of a broker.
	defaultReplicationFactor = 1
)

// ProvisionConfig is Config.Provision: the settings of the topics that
// [ProvisionTopics] creates.
type ProvisionConfig struct {
	// Partitions of each new topic. Default: [DefaultPartitions].
	Partitions int32

	// ReplicationFactor of each new topic. Default: 1; set 3 in
	// production.
	ReplicationFactor int16

	// TopicConfigs are Kafka topic configs for new topics, such as
	// {"retention.ms": "604800000"}. Optional.
	TopicConfigs map[string]string
}

func (c *ProvisionConfig) setDefaults() {
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = defaultReplicationFactor
	}
}

func (c ProvisionConfig) validate(p *config.Problems) {
	if c.Partitions < 0 {
		p.Add("Provision.Partitions", "is %d; use 1 or more (0 means %d)", c.Partitions, DefaultPartitions)
	}
	if c.ReplicationFactor < 0 {
		p.Add("Provision.ReplicationFactor", "is %d; use 1 or more (0 means %d, production wants 3)", c.ReplicationFactor, defaultReplicationFactor)
	}
}

// ProvisionTopics creates those of the topics that do not exist yet, as
// Topics in the package doc describes, connecting as the publisher and the
// subscriber of cfg do (cfg.ConsumerGroup is not used). An invalid name
// fails the whole call with an error that wraps topics.ErrInvalid and names
// the topic and the rule it breaks. ctx bounds the whole call.
func ProvisionTopics(ctx context.Context, cfg Config, names ...string) error {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	for _, name := range names {
		if err := topics.Validate(name); err != nil {
			return fmt.Errorf("broker: provision topics: %w", err)
		}
	}
	names = unique(names)
	if len(names) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("broker: provision topics %v: %w", names, err)
	}
	sc, err := cfg.adminSarama(ctx)
	if err != nil {
		return err
	}
	adm, err := sarama.NewClusterAdmin(cfg.Brokers, sc)
	if err != nil {
		return withContextErr(ctx, connectError(cfg, "provision topics: cluster admin", err))
	}
	defer adm.Close()
	if err := createTopics(ctx, adm, cfg, names); err != nil {
		return withContextErr(ctx, err)
	}
	return waitForTopics(ctx, adm, names)
}

// withContextErr adds ctx's error to err when ctx ended, which closed the
// connections that err is about.
func withContextErr(ctx context.Context, err error) error {
	if ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w: %w", err, ctx.Err())
}

// createTopics asks Kafka to create every topic; TOPIC_ALREADY_EXISTS is
// success.
func createTopics(ctx context.Context, adm sarama.ClusterAdmin, cfg Config, names []string) error {
	p := cfg.Provision
	detail := &sarama.TopicDetail{NumPartitions: p.Partitions, ReplicationFactor: p.ReplicationFactor, ConfigEntries: topicConfigs(p.TopicConfigs)}
	var errs []error
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("broker: create topics %v: %w", names, err)
		}
		err := adm.CreateTopic(name, detail, false)
		if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
			errs = append(errs, connectError(cfg,
				fmt.Sprintf("create topic %q (%d partitions, replication factor %d)", name, p.Partitions, p.ReplicationFactor), err))
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

func topicConfigs(in map[string]string) map[string]*string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]*string, len(in))
	for k, v := range in {
		out[k] = &v
	}
	return out
}

// topicPollInterval paces waitForTopics while a new topic propagates through
// a multi-broker cluster.
const topicPollInterval = 100 * time.Millisecond

// waitForTopics polls metadata until every topic has a leader for each of
// its partitions, or ctx ends.
func waitForTopics(ctx context.Context, adm sarama.ClusterAdmin, names []string) error {
	tick := time.NewTicker(topicPollInterval)
	defer tick.Stop()
	for {
		pending, err := topicsNotReady(adm, names)
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

func topicsNotReady(adm sarama.ClusterAdmin, names []string) ([]string, error) {
	details, err := adm.DescribeTopics(names)
	if err != nil {
		return names, err
	}
	ready := make(map[string]bool, len(details))
	for _, d := range details {
		ready[d.Name] = isReady(d)
	}
	var pending []string
	for _, name := range names {
		if !ready[name] {
			pending = append(pending, name)
		}
	}
	return pending, nil
}

func isReady(d *sarama.TopicMetadata) bool {
	if !errors.Is(d.Err, sarama.ErrNoError) || len(d.Partitions) == 0 {
		return false
	}
	for _, p := range d.Partitions {
		if !errors.Is(p.Err, sarama.ErrNoError) || p.Leader < 0 {
			return false
		}
	}
	return true
}
