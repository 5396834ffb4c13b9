package console

import (
	"slices"
	"strings"

	"github.com/koto-dev/watermill-koto/internal/offsets"
)

// groupNames returns the consumer groups to show, sorted: fixed when set;
// otherwise the groups of the cluster, replay groups left out, and the
// group of every dead-letter topic, whose consumer may be down or gone.
func groupNames(fixed []string, cluster []offsets.Group, topics []string) []string {
	if len(fixed) > 0 {
		return slices.Sorted(slices.Values(slices.Compact(slices.Sorted(slices.Values(fixed)))))
	}
	seen := map[string]bool{}
	for _, g := range cluster {
		if !strings.HasSuffix(g.Name, replayGroupSuffix) {
			seen[g.Name] = true
		}
	}
	for _, t := range topics {
		if g, ok := strings.CutSuffix(t, dlqSuffix); ok && g != "" {
			seen[g] = true
		}
	}
	names := make([]string, 0, len(seen))
	for g := range seen {
		names = append(names, g)
	}
	slices.Sort(names)
	return names
}
