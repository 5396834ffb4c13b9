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

	mu     sync.Mutex
	done   map[int32][]offsetRange // acked above the committed offsets, as Setup read them; each claim takes its own
	joined int                     // partitions Setup counted in the subscriber's slots that no claim took yet
}

// Setup reads, where acks may come out of offset order (the concurrent
// and batch modes), which offsets earlier owners acked above the
// committed ones of the claimed partitions, in one request for them all;
// in the concurrent mode it counts them in the subscriber's slots before
// any starts, so that the first to start cannot take the others' share.
func (h *groupHandler) Setup(sess sarama.ConsumerGroupSession) error {
	if !h.sub.cfg.acksOutOfOrder() {
		return nil
	}
	claimed := sess.Claims()[h.sub.topic]
	done := h.fetchDone(claimed)
	joined := 0
	if h.sub.cfg.concurrent() {
		h.sub.slots.join(len(claimed))
		joined = len(claimed)
	}
	h.mu.Lock()
	h.done, h.joined = done, h.joined+joined
	h.mu.Unlock()
	return nil
}

// Cleanup counts out of the slots the partitions Setup counted in that
// were never consumed; each consumed partition did when it ended.
func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	n := h.joined
	h.joined = 0
	h.mu.Unlock()
	for range n {
		h.sub.slots.leave(0)
	}
	return nil
}

// joinSlots counts a claimed partition in the subscriber's slots, unless
// Setup did: with a cooperative strategy, a partition assigned later
// comes without a Setup.
func (h *groupHandler) joinSlots() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.joined > 0 {
		h.joined--
		return
	}
	h.sub.slots.join(1)
}

// ConsumeClaim hands out the messages of one partition until it is
// revoked or the session ends, then drains and marks what was acked.
func (h *groupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	tp := map[string][]int32{claim.Topic(): {claim.Partition()}}
	// sarama keeps a partition's pause across claims; each claim starts
	// and ends resumed.
	h.conn.group.Resume(tp)
	defer h.conn.group.Resume(tp)
	if h.sub.cfg.concurrent() {
		h.joinSlots()
	}
	newPartition(h.sub, sess, claim, h.conn.group, h.claimDone(claim.Partition())).run()
	return nil
}

// claimDone returns the offsets acked above the committed one of a
// partition just claimed. Each claim takes what Setup read for it: with a
// cooperative strategy Setup runs only at the first join, so a partition
// assigned later is read here, and one that comes back does not reuse
// what an earlier claim of it was given.
func (h *groupHandler) claimDone(p int32) []offsetRange {
	if !h.sub.cfg.acksOutOfOrder() {
		return nil
	}
	h.mu.Lock()
	done, ok := h.done[p]
	delete(h.done, p)
	h.mu.Unlock()
	if ok {
		return done
	}
	return h.fetchDone([]int32{p})[p]
}

// fetchDone reads the committed metadata of partitions and the offsets it
// lists as acked, with an entry, empty when it lists none, for each
// partition read. It is an optimisation: on failure it logs and skips
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
