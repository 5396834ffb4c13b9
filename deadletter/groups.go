package deadletter

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/topics"
)

// Groups returns, sorted, the consumer groups that have a dead-letter
// topic (topics.DeadLetter(group)) on the cluster of cfg. It creates no
// topic.
func Groups(ctx context.Context, cfg broker.Config) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("deadletter: %w", err)
	}
	client, err := broker.NewSaramaClient(noTopicCreation(cfg))
	if err != nil {
		return nil, fmt.Errorf("deadletter: %w", err)
	}
	defer client.Close()
	if err := client.RefreshMetadata(); err != nil { // every topic: creates none
		return nil, fmt.Errorf("deadletter: listing the topics: %w", err)
	}
	names, err := client.Topics()
	if err != nil {
		return nil, fmt.Errorf("deadletter: listing the topics: %w", err)
	}
	suffix := topics.DeadLetter("") // what DeadLetter appends to a group
	var groups []string
	for _, t := range names {
		if g, ok := strings.CutSuffix(t, suffix); ok && g != "" {
			groups = append(groups, g)
		}
	}
	slices.Sort(groups)
	return groups, nil
}
