package offsets

import (
	"errors"
	"fmt"
	"slices"

	"github.com/IBM/sarama"
)

// Reader reads offsets with one sarama client. Build it with [NewReader];
// Close closes the client too.
type Reader struct {
	client sarama.Client
	admin  sarama.ClusterAdmin
}

// NewReader returns a Reader on client, which it takes over.
func NewReader(client sarama.Client) (*Reader, error) {
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return nil, fmt.Errorf("offsets: %w", err)
	}
	return &Reader{client: client, admin: admin}, nil
}

// Close closes the client.
func (r *Reader) Close() error { return r.admin.Close() }

// Group is a consumer group as the cluster describes it.
type Group struct {
	Name string
	// State is Kafka's: Stable, Empty, PreparingRebalance, Dead...
	State string
	// Members is how many consumers are in the group now.
	Members int
}

// Groups returns the consumer groups of the cluster, sorted by name.
func (r *Reader) Groups() ([]Group, error) {
	listed, err := r.admin.ListConsumerGroups()
	if err != nil {
		return nil, fmt.Errorf("offsets: list consumer groups: %w", err)
	}
	names := make([]string, 0, len(listed))
	for name := range listed {
		names = append(names, name)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return nil, nil
	}
	described, err := r.admin.DescribeConsumerGroups(names)
	if err != nil {
		return nil, fmt.Errorf("offsets: describe consumer groups: %w", err)
	}
	byName := make(map[string]*sarama.GroupDescription, len(described))
	for _, d := range described {
		byName[d.GroupId] = d
	}
	groups := make([]Group, len(names))
	for i, name := range names {
		groups[i] = Group{Name: name}
		if d := byName[name]; d != nil {
			groups[i].State, groups[i].Members = d.State, len(d.Members)
		}
	}
	return groups, nil
}

// Topics returns the topics of the cluster, sorted, internal ones left out.
func (r *Reader) Topics() ([]string, error) {
	if err := r.client.RefreshMetadata(); err != nil {
		return nil, fmt.Errorf("offsets: read metadata: %w", err)
	}
	topics, err := r.client.Topics()
	if err != nil {
		return nil, fmt.Errorf("offsets: list topics: %w", err)
	}
	topics = slices.DeleteFunc(topics, func(t string) bool { return len(t) > 0 && t[0] == '_' })
	slices.Sort(topics)
	return topics, nil
}

// Committed returns the offsets group has committed, by topic and
// partition; a group that never committed has none.
func (r *Reader) Committed(group string) (map[string]map[int32]int64, error) {
	resp, err := r.admin.ListConsumerGroupOffsets(group, nil)
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		return map[string]map[int32]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("offsets: committed offsets of %s: %w", group, err)
	}
	out := map[string]map[int32]int64{}
	for topic, blocks := range resp.Blocks {
		for p, b := range blocks {
			if b == nil || b.Err != sarama.ErrNoError || b.Offset < 0 {
				continue
			}
			if out[topic] == nil {
				out[topic] = map[int32]int64{}
			}
			out[topic][p] = b.Offset
		}
	}
	return out, nil
}
