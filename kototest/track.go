package kototest

import (
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/internal/reporting"
)

// tracker follows every delivery of the harness's router: which are in
// flight, which offsets each handler finished, and what became of each.
type tracker struct {
	mu         sync.Mutex
	inFlight   map[*delivery]bool
	finished   map[partitionOf]*offsetSet
	deliveries []Delivery
	changed    chan struct{} // closed, and replaced, at each change
	version    uint64        // counts the changes
}

// partitionOf is a handler's partition of a topic.
type partitionOf struct {
	handler   string
	topic     string
	partition int32
}

func newTracker() *tracker {
	return &tracker{inFlight: map[*delivery]bool{}, finished: map[partitionOf]*offsetSet{}, changed: make(chan struct{})}
}

// delivery is one delivery under way: the outcome reported by the chain's
// Logging middleware, and the retries.
type delivery struct {
	msg     *message.Message
	handler string
	pos     koto.Position
	hasPos  bool

	mu      sync.Mutex
	outcome string
	retries int
	err     error
}

func (d *delivery) Report(o reporting.Outcome) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.outcome, d.err = o.Outcome, o.Err
}

func (d *delivery) Retried(reporting.Retry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.retries++
}

func (d *delivery) StoreCall(string) func(error) { return func(error) {} }

// middleware is the outermost middleware of the router.
func (tr *tracker) middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		ctx := msg.Context()
		d := &delivery{msg: msg, handler: message.HandlerNameFromCtx(ctx)}
		d.pos, d.hasPos = koto.PositionFromContext(ctx)
		tr.begin(d)
		msg.SetContext(reporting.With(ctx, d))
		produced, err := h(msg)
		if err == nil && len(produced) > 0 {
			// The router publishes them, then acks: the delivery is over
			// with the ack.
			go tr.endOnAck(d)
		} else {
			tr.end(d, err == nil)
		}
		return produced, err
	}
}

func (tr *tracker) begin(d *delivery) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.inFlight[d] = true
	tr.notify()
}

func (tr *tracker) endOnAck(d *delivery) {
	select {
	case <-d.msg.Acked():
		tr.end(d, true)
	case <-d.msg.Nacked():
		tr.end(d, false)
	}
}

// end records the end of d: acked, or nacked for a redelivery.
func (tr *tracker) end(d *delivery, acked bool) {
	rec := d.record(acked)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	delete(tr.inFlight, d)
	tr.deliveries = append(tr.deliveries, rec)
	if acked && d.hasPos {
		k := partitionOf{d.handler, d.pos.Topic, d.pos.Partition}
		if tr.finished[k] == nil {
			tr.finished[k] = &offsetSet{}
		}
		tr.finished[k].add(d.pos.Offset)
	}
	tr.notify()
}

// notify wakes the waits. Under mu.
func (tr *tracker) notify() {
	tr.version++
	close(tr.changed)
	tr.changed = make(chan struct{})
}

// wake returns a channel closed at the next change, and the count of
// changes so far.
func (tr *tracker) wake() (<-chan struct{}, uint64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.changed, tr.version
}

// done returns how far the handler finished a partition from start: the
// first offset from start on that it has not finished.
func (tr *tracker) done(k partitionOf, start int64) int64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if s := tr.finished[k]; s != nil {
		return s.firstMissing(start)
	}
	return start
}

// flying returns the deliveries in flight.
func (tr *tracker) flying() []*delivery {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make([]*delivery, 0, len(tr.inFlight))
	for d := range tr.inFlight {
		out = append(out, d)
	}
	return out
}

func (tr *tracker) all() []Delivery {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]Delivery(nil), tr.deliveries...)
}

// offsetSet is a set of offsets, kept as the count from its lowest on.
type offsetSet struct {
	has map[int64]bool
}

func (s *offsetSet) add(off int64) {
	if s.has == nil {
		s.has = map[int64]bool{}
	}
	s.has[off] = true
}

func (s *offsetSet) firstMissing(from int64) int64 {
	for s.has[from] {
		from++
	}
	return from
}
