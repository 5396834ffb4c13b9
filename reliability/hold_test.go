package reliability

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/kototest"
)

// holdKey is the metadata key of a message whose handler waits, after its
// effect or before it (holdAtKey), until the test opens the message's
// hold: its value is the hold's number. A scenario marks one message in
// each part of its stream and injects a fault while that message is held,
// so that the fault lands with a delivery in flight on any machine,
// however fast its consumers run.
const (
	holdKey   = "reliability_hold"
	holdAtKey = "reliability_hold_at"
)

// holdAt is where a handler holds a marked delivery.
type holdAt string

const (
	afterEffect  holdAt = "" // the default
	beforeEffect holdAt = "before-effect"
)

// holds are the holds of the consumers of one process: hold k is open
// once open is above k. A held handler waits for its hold alone, not for
// its message's context: a delivery can outlive a fault (its partition
// revoked, its connection cut) as a slow handler would.
type holds struct {
	mu     sync.Mutex
	open   int
	opened chan struct{}           // closed, and replaced, as open grows
	held   map[int][]string        // the consumers that hold a delivery, by hold
	onHold func(k int, who string) // called as a delivery is held
}

// newHolds returns holds with those below open already open.
func newHolds(open int) *holds {
	return &holds{open: open, opened: make(chan struct{}), held: map[int][]string{}}
}

// newTestHolds returns holds, all closed, that open all when t ends, so
// that no consumer of t waits for a hold as it stops.
func newTestHolds(t *testing.T) *holds {
	h := newHolds(0)
	t.Cleanup(h.openAll)
	return h
}

// wait holds the delivery of msg by who, when msg is marked with a hold
// at at that is not open, until it opens.
func (h *holds) wait(at holdAt, who string, msg *message.Message) error {
	v := msg.Metadata.Get(holdKey)
	if v == "" || h == nil || holdAt(msg.Metadata.Get(holdAtKey)) != at {
		return nil
	}
	k, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%s %q: %w", holdKey, v, err)
	}
	h.mu.Lock()
	if k < h.open {
		h.mu.Unlock()
		return nil
	}
	h.held[k] = append(h.held[k], who)
	opened := h.opened
	h.mu.Unlock()
	if h.onHold != nil {
		h.onHold(k, who)
	}
	for {
		<-opened
		h.mu.Lock()
		if k < h.open {
			i := slices.Index(h.held[k], who)
			h.held[k] = slices.Delete(h.held[k], i, i+1)
			h.mu.Unlock()
			return nil
		}
		opened = h.opened
		h.mu.Unlock()
	}
}

// openTo opens the holds below n.
func (h *holds) openTo(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n > h.open {
		h.open = n
		close(h.opened)
		h.opened = make(chan struct{})
	}
}

// openAll opens every hold.
func (h *holds) openAll() { h.openTo(math.MaxInt) }

// holders returns the consumers that hold a delivery of hold k now.
func (h *holds) holders(k int) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.held[k])
}

// waitHeld waits until each of whos holds a delivery of hold k.
func (h *holds) waitHeld(t *testing.T, k int, whos ...string) {
	t.Helper()
	kototest.WaitFor(t, fmt.Sprintf("hold %d to hold a delivery in each of %v", k, whos), func() bool {
		held := h.holders(k)
		for _, who := range whos {
			if !slices.Contains(held, who) {
				return false
			}
		}
		return true
	})
}

// streamParts returns the bounds of n equal parts of a stream of length
// total: part k is [bounds[k], bounds[k+1]).
func streamParts(total, n int) []int {
	bounds := make([]int, n+1)
	for k := range bounds {
		bounds[k] = k * total / n
	}
	return bounds
}

// markHolds marks, in each of the first n parts of msgs, a message with
// hold k, the part's number, after its effect (see markHold). It returns
// their places in msgs.
func markHolds(msgs []*message.Message, bounds []int, n int) []int {
	marked := make([]int, n)
	for k := range n {
		marked[k] = markHold(msgs, bounds[k], bounds[k+1], k)
	}
	return marked
}

// markHold marks a message of msgs[from:to] with hold k, after its
// effect, chosen at random in the middle half of that part: a message's
// first publication, so that it is not skipped as a duplicate before its
// handler. It returns its place in msgs.
func markHold(msgs []*message.Message, from, to, k int) int {
	firstAt := map[string]int{}
	for i, m := range msgs[:to] {
		if _, ok := firstAt[m.UUID]; !ok {
			firstAt[m.UUID] = i
		}
	}
	lo, hi := from+(to-from)/4, from+3*(to-from)/4
	for _, i := range rand.Perm(hi - lo) {
		if m := msgs[lo+i]; firstAt[m.UUID] == lo+i {
			m.Metadata.Set(holdKey, strconv.Itoa(k))
			return lo + i
		}
	}
	panic(fmt.Sprintf("no first publication of a message in [%d, %d) of the stream", lo, hi))
}
