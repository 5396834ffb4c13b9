package broker

import "github.com/IBM/sarama"

// laneMode is what makes records of a partition wait for each other.
type laneMode int

const (
	lanePerPartition laneMode = iota // one record of the partition at a time
	lanePerKey                       // one record per key; keyless records share one lane
	laneNone                         // any record at any time
)

func (c Config) laneMode() laneMode {
	switch {
	case !c.concurrent():
		return lanePerPartition
	case c.Ordering == Unordered:
		return laneNone
	}
	return lanePerKey
}

// lanes keeps, for each lane of a partition that has a record in flight,
// the records that wait for it, in offset order.
type lanes struct {
	mode laneMode
	busy map[string][]*sarama.ConsumerMessage
}

func newLanes(mode laneMode) lanes {
	return lanes{mode: mode, busy: map[string][]*sarama.ConsumerMessage{}}
}

func (l *lanes) key(rec *sarama.ConsumerMessage) string {
	if l.mode == lanePerKey {
		return string(rec.Key)
	}
	return ""
}

// push queues rec behind its lane, or reports that it is free to hand
// out now: its lane is busy until [lanes.finish].
func (l *lanes) push(rec *sarama.ConsumerMessage) (free bool) {
	switch l.mode {
	case laneNone:
		return true
	}
	k := l.key(rec)
	waiting, busy := l.busy[k]
	if !busy {
		l.busy[k] = nil
		return true
	}
	l.busy[k] = append(waiting, rec)
	return false
}

// finish frees the lane of rec, which was handed out and acked or given
// up, and returns the record of that lane to hand out next, or nil; the
// lane stays busy with it.
func (l *lanes) finish(rec *sarama.ConsumerMessage) *sarama.ConsumerMessage {
	switch l.mode {
	case laneNone:
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
