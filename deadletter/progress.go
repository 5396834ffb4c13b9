package deadletter

import (
	"bytes"
	"cmp"
	"compress/flate"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The offset metadata this package commits starts with a prefix that
// says its format, and the rest is base64url-encoded, deflated bitmaps:
// progressPrefix the replayed offsets; discardPrefix the same, then a dot,
// the first discarded offset in decimal, a dot, and the discarded offsets
// from there. Progress without discards is written in the first format,
// which every version of this package reads.
const (
	progressPrefix = "dlq1:"
	discardPrefix  = "dlq2:"
)

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
// dead-letter topic: the dead letters below next were resolved, replayed
// or discarded (or passed over on purpose by moving the group's offset),
// and so were those in done, which all lie above next. discarded are the
// resolved ones that were discarded rather than replayed, above next or
// not.
type progress struct {
	next      int64
	done      []span // sorted, disjoint and not touching
	discarded []span // likewise
}

// span is the offsets lo..hi-1.
type span struct{ lo, hi int64 }

// clone returns a copy that shares nothing with p.
func (p progress) clone() progress {
	p.done = slices.Clone(p.done)
	p.discarded = slices.Clone(p.discarded)
	return p
}

// has reports whether the dead letter at off was resolved.
func (p *progress) has(off int64) bool {
	return off < p.next || inSpans(p.done, off)
}

// isDiscarded reports whether the dead letter at off was discarded.
func (p *progress) isDiscarded(off int64) bool { return inSpans(p.discarded, off) }

// inSpans reports whether off is in one of spans.
func inSpans(spans []span, off int64) bool {
	_, found := slices.BinarySearchFunc(spans, off, func(s span, off int64) int {
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
	p.done = addSpan(p.done, off)
	if len(p.done) > 0 && p.done[0].lo == p.next {
		p.next = p.done[0].hi
		p.done = p.done[1:]
	}
}

// discard records the dead letter at off as discarded, unless it was
// resolved already.
func (p *progress) discard(off int64) {
	if p.has(off) {
		return
	}
	p.add(off)
	p.discarded = addSpan(p.discarded, off)
}

// addSpan returns spans with off, which it does not hold, added.
func addSpan(spans []span, off int64) []span {
	i, _ := slices.BinarySearchFunc(spans, off, func(s span, off int64) int { return cmp.Compare(s.lo, off) })
	joinPrev := i > 0 && spans[i-1].hi == off
	joinNext := i < len(spans) && spans[i].lo == off+1
	switch {
	case joinPrev && joinNext:
		spans[i-1].hi = spans[i].hi
		return slices.Delete(spans, i, i+1)
	case joinPrev:
		spans[i-1].hi++
	case joinNext:
		spans[i].lo--
	default:
		return slices.Insert(spans, i, span{off, off + 1})
	}
	return spans
}

// union adds what other records.
func (p *progress) union(other progress) {
	p.next = max(p.next, other.next)
	p.done = append(p.done, other.done...)
	p.discarded = mergeSpans(append(p.discarded, other.discarded...), math.MinInt64)
	p.normalize()
}

// floor moves next up to oldest, the first offset the topic still holds:
// what retention deleted can no longer be replayed, nor shown discarded.
func (p *progress) floor(oldest int64) {
	if p.next < oldest {
		p.next = oldest
		p.normalize()
	}
	p.discarded = mergeSpans(p.discarded, oldest)
}

// normalize merges touching spans, drops those below next and moves next
// over a span that starts at it.
func (p *progress) normalize() {
	p.done = mergeSpans(p.done, p.next)
	for len(p.done) > 0 && p.done[0].lo <= p.next {
		p.next = max(p.next, p.done[0].hi)
		p.done = p.done[1:]
	}
}

// mergeSpans sorts spans, cuts them below from and merges those that
// overlap or touch.
func mergeSpans(spans []span, from int64) []span {
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	out := spans[:0]
	for _, s := range spans {
		s.lo = max(s.lo, from)
		switch {
		case s.hi <= s.lo:
			continue
		case len(out) > 0 && out[len(out)-1].hi >= s.lo:
			out[len(out)-1].hi = max(out[len(out)-1].hi, s.hi)
			continue
		}
		out = append(out, s)
	}
	return out
}

// metadata encodes done and discarded for an offset commit: "" when both
// are empty, otherwise in one of the formats of progressPrefix and
// discardPrefix, a bitmap's bit i (least significant first) standing for
// offset base+i.
func (p *progress) metadata() (string, error) {
	done, err := encodeSpans(p.next, p.done)
	if err != nil {
		return "", err
	}
	var md string
	switch {
	case len(p.discarded) > 0:
		base := p.discarded[0].lo
		discarded, err := encodeSpans(base, p.discarded)
		if err != nil {
			return "", err
		}
		md = discardPrefix + done + "." + strconv.FormatInt(base, 10) + "." + discarded
	case len(p.done) > 0:
		md = progressPrefix + done
	}
	if len(md) > maxProgressMetadata {
		return "", errProgressFull
	}
	return md, nil
}

// encodeSpans returns the bitmap of spans from base, deflated and
// base64url-encoded; "" for no spans.
func encodeSpans(base int64, spans []span) (string, error) {
	if len(spans) == 0 {
		return "", nil
	}
	bits := spans[len(spans)-1].hi - base
	if bits > maxProgressBits {
		return "", errProgressFull
	}
	bitmap := make([]byte, (bits+7)/8)
	for _, s := range spans {
		for off := s.lo; off < s.hi; off++ {
			i := off - base
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
	return base64.RawURLEncoding.EncodeToString(buf.Bytes()), nil
}

// parseProgress decodes a committed offset and its metadata. offset is -1
// when nothing was committed; empty metadata means plain Kafka offset
// semantics, everything below offset done, as an operator who resets the
// group's offset with Kafka's tools gets.
func parseProgress(offset int64, metadata string) (progress, error) {
	p := progress{next: max(offset, 0)}
	var done string
	var err error
	if encoded, ok := strings.CutPrefix(metadata, progressPrefix); ok {
		done = encoded
	} else if encoded, ok := strings.CutPrefix(metadata, discardPrefix); ok {
		done, p.discarded, err = parseDiscarded(encoded)
	} else if metadata != "" {
		err = fmt.Errorf("%w: %.40q", errForeignProgress, metadata)
	}
	if err == nil {
		p.done, err = decodeSpans(p.next, done)
	}
	if err != nil {
		return progress{next: p.next}, err
	}
	p.done = append(p.done, p.discarded...) // what was discarded is resolved
	p.normalize()
	return p, nil
}

// parseDiscarded splits the rest of a discardPrefix metadata into the
// encoded replayed bitmap and the discarded spans.
func parseDiscarded(encoded string) (done string, discarded []span, err error) {
	parts := strings.Split(encoded, ".")
	if len(parts) != 3 {
		return "", nil, fmt.Errorf("%w: %d parts after %s, want 3", errForeignProgress, len(parts), discardPrefix)
	}
	base, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || base < 0 {
		return "", nil, fmt.Errorf("%w: first discarded offset %q", errForeignProgress, parts[1])
	}
	discarded, err = decodeSpans(base, parts[2])
	return parts[0], discarded, err
}

// decodeSpans reads what encodeSpans wrote for base.
func decodeSpans(base int64, encoded string) ([]span, error) {
	if encoded == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errForeignProgress, err)
	}
	bitmap, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(raw)), maxProgressBits/8+1))
	if err != nil || len(bitmap) > maxProgressBits/8 {
		return nil, fmt.Errorf("%w: bitmap does not inflate (%v)", errForeignProgress, err)
	}
	var spans []span
	for i, b := range bitmap {
		for bit := range 8 {
			if b&(1<<bit) == 0 {
				continue
			}
			off := base + int64(i)*8 + int64(bit)
			if n := len(spans); n > 0 && spans[n-1].hi == off {
				spans[n-1].hi++
			} else {
				spans = append(spans, span{off, off + 1})
			}
		}
	}
	return spans, nil
}
