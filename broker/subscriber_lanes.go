package broker

import (
	"github.com/IBM/sarama"

	koto "github.com/koto-dev/watermill-koto"
)

// laneMode is what makes records of a partition wait for each other.
type laneMode int

const (
	lanePerPartition laneMode = iota // one record of the partition at a time
	lanePerKey                       // one record per key; keyless records share one lane
	laneChain                        // every record at once, each knowing the one before it in its key
	laneNone                         // any record at any time
)

func (c Config) laneMode() laneMode {
	switch {
	case !c.concurrent():
		return lanePerPartition
	case c.Ordering == Unordered:
		return laneNone
	case c.Ordering == OrderByKeyInBatches:
		return laneChain
	}
	return lanePerKey
}

// handout is a record free to be handed out, with, in the chain mode, the
// record before it in its key that was not acked yet.
type handout struct {
	rec   *sarama.ConsumerMessage
	after *koto.Predecessor
}

// lanes keeps, for each lane of a partition that has a record in flight,
// the records that wait for it, in offset order; in the chain mode, the
// last record handed out of each key instead, and each record's link.
type lanes struct {
	mode  laneMode
	busy  map[string][]*sarama.ConsumerMessage
	last  map[string]*link // chain mode: the last record of each key in flight
	links map[int64]*link  // chain mode: the link of each record in flight, by offset
}

// link is a record in flight in the chain mode: its successor waits for
// done.
type link struct {
	key    string
	offset int64
	done   chan struct{}
}

func newLanes(mode laneMode) lanes {
	l := lanes{mode: mode, busy: map[string][]*sarama.ConsumerMessage{}}
	if mode == laneChain {
		l.last, l.links = map[string]*link{}, map[int64]*link{}
	}
	return l
}

func (l *lanes) key(rec *sarama.ConsumerMessage) string {
	if l.mode == lanePerKey || l.mode == laneChain {
		return string(rec.Key)
	}
	return ""
}

// push queues rec behind its lane, or returns it to hand out now: its
// lane is busy until [lanes.finish]. In the chain mode every record goes
// at once, after the last one of its key.
func (l *lanes) push(rec *sarama.ConsumerMessage) (h handout, free bool) {
	switch l.mode {
	case laneNone:
		return handout{rec: rec}, true
	case laneChain:
		return l.chain(rec), true
	}
	k := l.key(rec)
	waiting, busy := l.busy[k]
	if !busy {
		l.busy[k] = nil
		return handout{rec: rec}, true
	}
	l.busy[k] = append(waiting, rec)
	return handout{}, false
}

// chain links rec after the last record of its key in flight.
func (l *lanes) chain(rec *sarama.ConsumerMessage) handout {
	k := l.key(rec)
	this := &link{key: k, offset: rec.Offset, done: make(chan struct{})}
	h := handout{rec: rec}
	if prev := l.last[k]; prev != nil {
		h.after = &koto.Predecessor{Offset: prev.offset, Done: prev.done}
	}
	l.last[k], l.links[rec.Offset] = this, this
	return h
}

// finish frees the lane of rec, which was handed out and acked or given
// up, and returns the record of that lane to hand out next, or nil; the
// lane stays busy with it. In the chain mode it tells rec's successor
// that rec was acked.
func (l *lanes) finish(rec *sarama.ConsumerMessage, acked bool) *sarama.ConsumerMessage {
	switch l.mode {
	case laneNone:
		return nil
	case laneChain:
		l.unchain(rec, acked)
		return nil
	}
	k := l.key(rec)
	waiting := l.busy[k]
	if len(waiting) == 0 {
		delete(l.busy, k)
		return nil
	}
	next := waiting[0]
	waiting[0] = nil
	l.busy[k] = waiting[1:]
	return next
}

func (l *lanes) unchain(rec *sarama.ConsumerMessage, acked bool) {
	this := l.links[rec.Offset]
	if this == nil {
		return
	}
	delete(l.links, rec.Offset)
	if acked {
		close(this.done)
	}
	if l.last[this.key] == this {
		delete(l.last, this.key)
	}
}
