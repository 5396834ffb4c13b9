package embedded

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// createTopics creates the topics over the Kafka protocol, as a client would.
// kfake seeds topics only into an empty data directory, so a broker restarted
// on existing data would otherwise miss topics added to WithTopics later.
func createTopics(ctx context.Context, addrs []string, partitions int32, names []string) error {
	if len(names) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return fmt.Errorf("embedded: admin client: %w", err)
	}
	defer cl.Close()
	resps, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, nil, names...)
	if err != nil {
		return fmt.Errorf("embedded: create topics %v: %w", names, err)
	}
	for _, r := range resps {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("embedded: create topic %q: %w", r.Topic, r.Err)
		}
	}
	return nil
}
