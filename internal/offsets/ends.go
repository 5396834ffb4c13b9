package offsets

import (
	"fmt"
	"slices"

	"github.com/IBM/sarama"
)

// Partition is one partition's span: records Start..End-1 are in it.
type Partition struct {
	Partition  int32
	Start, End int64
}

// Spans returns the span of every partition of each topic, in partition
// order. A topic that does not exist is left out, and not created: the
// metadata is read for every topic, which no broker takes as a request to
// create one.
func (r *Reader) Spans(topics []string) (map[string][]Partition, error) {
	existing, err := r.Topics()
	if err != nil {
		return nil, err
	}
	out := map[string][]Partition{}
	for _, t := range topics {
		if !slices.Contains(existing, t) {
			continue
		}
		ps, err := r.client.Partitions(t)
		if err != nil {
			return nil, fmt.Errorf("offsets: partitions of %s: %w", t, err)
		}
		for _, p := range ps {
			out[t] = append(out[t], Partition{Partition: p})
		}
	}
	for _, which := range []int64{sarama.OffsetOldest, sarama.OffsetNewest} {
		if err := r.fill(out, which); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fill sets Start (which is OffsetOldest) or End of every partition of
// spans, with one request per partition leader.
func (r *Reader) fill(spans map[string][]Partition, which int64) error {
	reqs := map[*sarama.Broker]*sarama.OffsetRequest{}
	for t, ps := range spans {
		for _, p := range ps {
			leader, err := r.client.Leader(t, p.Partition)
			if err != nil {
				return fmt.Errorf("offsets: leader of %s partition %d: %w", t, p.Partition, err)
			}
			if reqs[leader] == nil {
				reqs[leader] = sarama.NewOffsetRequest(r.client.Config().Version)
			}
			reqs[leader].AddBlock(t, p.Partition, which, 1)
		}
	}
	for b, req := range reqs {
		resp, err := b.GetAvailableOffsets(req)
		if err != nil {
			return fmt.Errorf("offsets: list offsets from broker %d: %w", b.ID(), err)
		}
		if err := set(spans, resp, which); err != nil {
			return err
		}
	}
	return nil
}

func set(spans map[string][]Partition, resp *sarama.OffsetResponse, which int64) error {
	for t, ps := range spans {
		for i := range ps {
			block := resp.GetBlock(t, ps[i].Partition)
			if block == nil {
				continue // asked of another leader
			}
			if block.Err != sarama.ErrNoError {
				return fmt.Errorf("offsets: offsets of %s partition %d: %w", t, ps[i].Partition, block.Err)
			}
			if which == sarama.OffsetOldest {
				ps[i].Start = block.Offset
			} else {
				ps[i].End = block.Offset
			}
		}
	}
	return nil
}
