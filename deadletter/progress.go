package deadletter

import (
	"bytes"
	"cmp"
	"compress/flate"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// progressPrefix starts the offset metadata this package commits; the rest
// is the replayed-offset bitmap, deflated and base64url-encoded.
const progressPrefix = "dlq1:"

// maxProgressMetadata bounds the committed metadata, below Kafka's default
// offset.metadata.max.bytes (4096).
const maxProgressMetadata = 4000

// maxProgressBits bounds the bitmap a committed metadata may expand to
// (16 Mi offsets), so that a corrupt one cannot take the memory.
const maxProgressBits = 1 << 24

// errProgressFull is returned by a replay whose record of sent dead letters
// would no longer fit in the replay group's offset metadata: the dead
// letters it sent are too scattered above the oldest one it has not sent.
// Replay the dead letters at the partition and offset the error names (or
// a range around them) first, or use a new replay group.
var errProgressFull = errors.New("deadletter: the replay group cannot record more scattered replays")

// errForeignProgress means the replay group has offsets committed with
// metadata this package did not write: the group is used by something
// else. Choose another replay group.
var errForeignProgress = errors.New("deadletter: the replay group's committed metadata is not this package's")

// progress is what the replay group records of one partition of the
// dead-letter topic: the dead letters below next were replayed (or passed
// over on purpose by moving the group's offset), and so were those in
// done, which all lie above next.
type progress struct {
	next int64
	done []span // sorted, disjoint and not touching
}

// span is the offsets lo..hi-1.
type span struct{ lo, hi int64 }

// clone returns a copy that shares nothing with p.
func (p progress) clone() progress {
	p.done = slices.Clone(p.done)
	return p
}

// has reports whether the dead letter at off was replayed.
func (p *progress) has(off int64) bool {
	if off < p.next {
		return true
	}
	_, found := slices.BinarySearchFunc(p.done, off, func(s span, off int64) int {
		switch {
		case s.hi <= off:
			return -1
		case s.lo > off:
			return 1
		}
		return 0
	})
	return found
}

// add records the dead letter at off as replayed. Replays add offsets in
// increasing order, which appends or grows the last span.
func (p *progress) add(off int64) {
	if p.has(off) {
		return
	}
	i, _ := slices.BinarySearchFunc(p.done, off, func(s span, off int64) int { return cmp.Compare(s.lo, off) })
	joinPrev := i > 0 && p.done[i-1].hi == off
	joinNext := i < len(p.done) && p.done[i].lo == off+1
	switch {
	case joinPrev && joinNext:
		p.done[i-1].hi = p.done[i].hi
		p.done = slices.Delete(p.done, i, i+1)
	case joinPrev:
		p.done[i-1].hi++
	case joinNext:
		p.done[i].lo--
	default:
		p.done = slices.Insert(p.done, i, span{off, off + 1})
	}
	if len(p.done) > 0 && p.done[0].lo == p.next {
		p.next = p.done[0].hi
		p.done = p.done[1:]
	}
}

// union adds what other records.
func (p *progress) union(other progress) {
	p.next = max(p.next, other.next)
	p.done = append(p.done, other.done...)
	slices.SortFunc(p.done, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	p.normalize()
}

// floor moves next up to oldest, the first offset the topic still holds:
// what retention deleted can no longer be replayed.
func (p *progress) floor(oldest int64) {
	if p.next < oldest {
		p.next = oldest
		p.normalize()
	}
}

// normalize merges touching spans, drops those below next and moves next
// over a span that starts at it.
func (p *progress) normalize() {
	out := p.done[:0]
	for _, s := range p.done {
		s.lo = max(s.lo, p.next)
		switch {
		case s.hi <= s.lo:
			continue
		case s.lo == p.next:
			p.next = s.hi
			continue
		case len(out) > 0 && out[len(out)-1].hi >= s.lo:
			out[len(out)-1].hi = max(out[len(out)-1].hi, s.hi)
			continue
		}
		out = append(out, s)
	}
	p.done = out
	// A merge may have made the first span start at next.
	for len(p.done) > 0 && p.done[0].lo <= p.next {
		p.next = max(p.next, p.done[0].hi)
		p.done = p.done[1:]
	}
}

// metadata encodes done for an offset commit: "" when empty, otherwise
// progressPrefix and the bitmap of offsets next.., bit i (least
// significant first) standing for offset next+i.
func (p *progress) metadata() (string, error) {
	if len(p.done) == 0 {
		return "", nil
	}
	bits := p.done[len(p.done)-1].hi - p.next
	if bits > maxProgressBits {
		return "", errProgressFull
	}
	bitmap := make([]byte, (bits+7)/8)
	for _, s := range p.done {
		for off := s.lo; off < s.hi; off++ {
			i := off - p.next
			bitmap[i/8] |= 1 << (i % 8)
		}
	}
	var buf bytes.Buffer
	zw, err := flate.NewWriter(&buf, flate.BestCompression)
	if err != nil {
		return "", err
	}
	if _, err := zw.Write(bitmap); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	md := progressPrefix + base64.RawURLEncoding.EncodeToString(buf.Bytes())
	if len(md) > maxProgressMetadata {
		return "", errProgressFull
	}
	return md, nil
}

// parseProgress decodes a committed offset and its metadata. offset is -1
// when nothing was committed; empty metadata means plain Kafka offset
// semantics, everything below offset done, as an operator who resets the
// group's offset with Kafka's tools gets.
func parseProgress(offset int64, metadata string) (progress, error) {
	p := progress{next: max(offset, 0)}
	if metadata == "" {
		return p, nil
	}
	encoded, ok := strings.CutPrefix(metadata, progressPrefix)
	if !ok {
		return p, fmt.Errorf("%w: %.40q", errForeignProgress, metadata)
	}
	raw, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil {
		return p, fmt.Errorf("%w: %v", errForeignProgress, err)
	}
	bitmap, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(raw)), maxProgressBits/8+1))
	if err != nil || len(bitmap) > maxProgressBits/8 {
		return p, fmt.Errorf("%w: bitmap does not inflate (%v)", errForeignProgress, err)
	}
	for i, b := range bitmap {
		for bit := range 8 {
			if b&(1<<bit) == 0 {
				continue
			}
			off := p.next + int64(i)*8 + int64(bit)
			if n := len(p.done); n > 0 && p.done[n-1].hi == off {
				p.done[n-1].hi++
			} else {
				p.done = append(p.done, span{off, off + 1})
			}
		}
	}
	p.normalize()
	return p, nil
}
