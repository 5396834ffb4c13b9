package broker

import (
	"sync"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
)

// groupHandler is the sarama side of a subscription: each claimed
// partition runs as a [partition] until it is revoked or the session ends.
type groupHandler struct {
	sub  *subscription
	conn *groupConn

	mu   sync.Mutex
	done map[int32][]offsetRange // acked above the committed offsets, per partition
}

// Setup reads, in the concurrent mode, which offsets earlier owners acked
// above the committed ones of the claimed partitions.
func (h *groupHandler) Setup(sess sarama.ConsumerGroupSession) error {
	if !h.sub.cfg.concurrent() {
		return nil
	}
	done := h.fetchDone(sess.Claims()[h.sub.topic])
	h.mu.Lock()
	h.done = done
	h.mu.Unlock()
	return nil
}

// Cleanup has nothing to release: each partition did when it ended.
func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim hands out the messages of one partition until it is
// revoked or the session ends, then drains and marks what was acked.
func (h *groupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	tp := map[string][]int32{claim.Topic(): {claim.Partition()}}
	// sarama keeps a partition's pause across claims; each claim starts
	// and ends resumed.
	h.conn.group.Resume(tp)
	defer h.conn.group.Resume(tp)
	h.mu.Lock()
	done := h.done[claim.Partition()]
	h.mu.Unlock()
	newPartition(h.sub, sess, claim, h.conn.group, done).run()
	return nil
}

// fetchDone reads the committed metadata of partitions and the offsets it
// lists as acked. It is an optimisation: on failure it logs and skips
// nothing.
func (h *groupHandler) fetchDone(partitions []int32) map[int32][]offsetRange {
	cfg := h.sub.cfg
	coordinator, err := h.conn.client.Coordinator(cfg.ConsumerGroup)
	var resp *sarama.OffsetFetchResponse
	if err == nil {
		req := sarama.NewOffsetFetchRequest(h.conn.client.Config().Version, cfg.ConsumerGroup, map[string][]int32{h.sub.topic: partitions})
		resp, err = coordinator.FetchOffset(req)
	}
	if err != nil {
		h.sub.logger.Info("Cannot read the committed offsets' metadata; offsets acked above them will be delivered again",
			watermill.LogFields{"err": err.Error()})
		return nil
	}
	done := map[int32][]offsetRange{}
	for _, p := range partitions {
		if b := resp.GetBlock(h.sub.topic, p); b != nil && b.Err == sarama.ErrNoError {
			done[p] = parseDoneOffsets(b.Offset, b.Metadata)
		}
	}
	return done
}
