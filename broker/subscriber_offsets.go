package broker

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// doneOffsetsPrefix starts the commit metadata in which a subscriber lists
// the offsets acked above the committed one.
const doneOffsetsPrefix = "koto1:"

// maxMetadata keeps the commit metadata under Kafka's default limit
// (offset.metadata.max.bytes, 4096); ranges that do not fit are left out,
// and their records are delivered again.
const maxMetadata = 3000

// offsets tracks the offsets of one partition that a subscriber received:
// the low-water mark is the first of them not acked, and the offsets acked
// above it are listed in the commit metadata. Records arrive in offset
// order.
type offsets struct {
	pending []pendingOffset // from the low-water mark on, in offset order
	head    int             // pending[:head] are acked and dropped
	next    int64           // the offset after the last one received; -1 before
	skip    []offsetRange   // acked by an earlier owner, from the commit metadata
}

type pendingOffset struct {
	offset int64
	done   bool
}

// offsetRange is the offsets from through to, both included.
type offsetRange struct{ from, to int64 }

func newOffsets(skip []offsetRange) offsets { return offsets{next: -1, skip: skip} }

// add records that off was received. It returns false when an earlier
// owner of the partition had acked it already: it counts as acked, and is
// not to be handed out.
func (o *offsets) add(off int64) bool {
	o.next = off + 1
	for len(o.skip) > 0 && o.skip[0].to < off {
		o.skip = o.skip[1:]
	}
	if len(o.skip) > 0 && o.skip[0].from <= off {
		if o.head == len(o.pending) {
			return false
		}
		o.pending = append(o.pending, pendingOffset{offset: off, done: true})
		return false
	}
	o.pending = append(o.pending, pendingOffset{offset: off})
	return true
}

// done records that off was acked.
func (o *offsets) done(off int64) {
	live := o.pending[o.head:]
	i, found := slices.BinarySearchFunc(live, off, func(p pendingOffset, off int64) int {
		return cmp.Compare(p.offset, off)
	})
	if !found {
		return
	}
	live[i].done = true
	for o.head < len(o.pending) && o.pending[o.head].done {
		o.head++
	}
	if o.head == len(o.pending) || o.head > 1024 && o.head > len(o.pending)/2 {
		o.pending = append(o.pending[:0], o.pending[o.head:]...)
		o.head = 0
	}
}

// mark returns the low-water mark, the offset to commit: the first offset
// received and not acked, or the one after the last received. ok is false
// before the first record.
func (o *offsets) mark() (offset int64, ok bool) {
	if o.head < len(o.pending) {
		return o.pending[o.head].offset, true
	}
	return o.next, o.next >= 0
}

// ahead is how many offsets from the low-water mark on were received.
func (o *offsets) ahead() int64 {
	mark, ok := o.mark()
	if !ok {
		return 0
	}
	return o.next - mark
}

// metadata lists the offsets acked above the mark, as ranges relative to
// it, for a later owner to skip; empty when there are none.
func (o *offsets) metadata() string {
	mark, _ := o.mark()
	var b strings.Builder
	live := o.pending[o.head:]
	for i := 0; i < len(live); {
		if !live[i].done {
			i++
			continue
		}
		j := i
		for j+1 < len(live) && live[j+1].done {
			j++
		}
		r := rangeText(live[i].offset-mark, live[j].offset-mark)
		if b.Len()+len(r)+len(doneOffsetsPrefix)+1 > maxMetadata {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r)
		i = j + 1
	}
	if b.Len() == 0 {
		return ""
	}
	return doneOffsetsPrefix + b.String()
}

func rangeText(from, to int64) string {
	if from == to {
		return strconv.FormatInt(from, 36)
	}
	return strconv.FormatInt(from, 36) + "-" + strconv.FormatInt(to, 36)
}

// parseDoneOffsets reads the ranges that metadata, committed with offset
// base, lists; nil for metadata of another format, or none.
func parseDoneOffsets(base int64, metadata string) []offsetRange {
	list, ok := strings.CutPrefix(metadata, doneOffsetsPrefix)
	if !ok || base < 0 {
		return nil
	}
	var ranges []offsetRange
	for item := range strings.SplitSeq(list, ",") {
		from, to, _ := strings.Cut(item, "-")
		if to == "" {
			to = from
		}
		f, err1 := strconv.ParseInt(from, 36, 64)
		t, err2 := strconv.ParseInt(to, 36, 64)
		if err1 != nil || err2 != nil || f <= 0 || t < f || len(ranges) > 0 && base+f <= ranges[len(ranges)-1].to {
			return nil // not written by this package: skip nothing
		}
		ranges = append(ranges, offsetRange{from: base + f, to: base + t})
	}
	return ranges
}
