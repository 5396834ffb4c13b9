package deadletter

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// offsets lists what p records at or above from, below to.
func (p *progress) offsets(from, to int64) []int64 {
	var out []int64
	for off := from; off < to; off++ {
		if p.has(off) {
			out = append(out, off)
		}
	}
	return out
}

func TestProgressAddAdvancesAndKeepsGaps(t *testing.T) {
	p := progress{next: 10}
	for _, off := range []int64{12, 11, 15, 14, 13, 20, 18} {
		p.add(off)
	}
	if p.next != 10 || !slices.Equal(p.done, []span{{11, 16}, {18, 19}, {20, 21}}) {
		t.Fatalf("after adds above a gap at 10: next %d done %v", p.next, p.done)
	}
	p.add(10)
	if p.next != 16 || !slices.Equal(p.done, []span{{18, 19}, {20, 21}}) {
		t.Fatalf("after filling 10: next %d done %v, want next 16", p.next, p.done)
	}
	if !p.has(3) || p.has(16) || !p.has(18) || p.has(19) {
		t.Fatalf("has: 3 %v 16 %v 18 %v 19 %v", p.has(3), p.has(16), p.has(18), p.has(19))
	}
	p.floor(19)
	if p.next != 19 || !slices.Equal(p.done, []span{{20, 21}}) {
		t.Fatalf("after floor(19): next %d done %v, want 19 and 20 above", p.next, p.done)
	}
	p.floor(20)
	if p.next != 21 || len(p.done) != 0 {
		t.Fatalf("after floor(20): next %d done %v, want 21 and nothing above", p.next, p.done)
	}
}

func TestProgressUnion(t *testing.T) {
	a, b := progress{next: 5, done: []span{{7, 9}, {20, 22}}}, progress{next: 8, done: []span{{9, 12}, {30, 31}}}
	a.union(b)
	if a.next != 12 || !slices.Equal(a.done, []span{{20, 22}, {30, 31}}) {
		t.Fatalf("union: next %d done %v", a.next, a.done)
	}
}

// TestProgressMatchesASet adds random offsets to a progress and to a map,
// encodes and decodes the progress after each batch, and compares.
func TestProgressMatchesASet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		p := progress{next: int64(rng.IntN(100))}
		set := map[int64]bool{}
		for range 20 {
			for range rng.IntN(50) {
				off := p.next + int64(rng.IntN(400)) - 20
				p.add(off)
				set[off] = true
			}
			md, err := p.metadata()
			if err != nil {
				t.Fatalf("round %d: metadata: %v", round, err)
			}
			decoded, err := parseProgress(p.next, md)
			if err != nil {
				t.Fatalf("round %d: parse %q: %v", round, md, err)
			}
			for off := p.next - 30; off < p.next+500; off++ {
				want := set[off] || off < p.next
				if p.has(off) != want || decoded.has(off) != want {
					t.Fatalf("round %d: offset %d: has %v, decoded %v, want %v", round, off, p.has(off), decoded.has(off), want)
				}
			}
			if p.next > 0 && !set[p.next-1] && decoded.next == p.next && len(p.done) > 0 && p.done[0].lo == p.next {
				t.Fatalf("round %d: not normalized: next %d done %v", round, p.next, p.done)
			}
		}
	}
}

func TestProgressMetadataIsSmallForRuns(t *testing.T) {
	p := progress{next: 0}
	for off := int64(1); off < 200_000; off += 2 { // every other offset: 100 000 spans
		p.add(off)
	}
	md, err := p.metadata()
	if err != nil {
		t.Fatalf("metadata of an alternating pattern: %v", err)
	}
	if len(md) > 1000 {
		t.Fatalf("metadata of an alternating pattern is %d bytes", len(md))
	}
	decoded, err := parseProgress(0, md)
	if err != nil || !slices.Equal(decoded.offsets(0, 200_000), p.offsets(0, 200_000)) {
		t.Fatalf("round trip of an alternating pattern: %v", err)
	}
}

func TestProgressFull(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	offsets := make([]int64, 50_000) // random offsets do not compress
	for i := range offsets {
		offsets[i] = 1 + int64(rng.IntN(1_000_000))
	}
	slices.Sort(offsets)
	p := progress{next: 0}
	for _, off := range offsets {
		p.add(off)
	}
	if _, err := p.metadata(); !errors.Is(err, errProgressFull) {
		t.Fatalf("metadata of 50 000 random offsets in 1 000 000: %v, want errProgressFull", err)
	}
}

func TestParseProgress(t *testing.T) {
	p, err := parseProgress(-1, "")
	if err != nil || p.next != 0 || len(p.done) != 0 {
		t.Fatalf("nothing committed: %+v, %v", p, err)
	}
	p, err = parseProgress(42, "") // an offset reset with Kafka's tools
	if err != nil || !p.has(41) || p.has(42) {
		t.Fatalf("plain offset 42: %+v, %v", p, err)
	}
	for _, md := range []string{"something else", progressPrefix + "!!!", progressPrefix + "AAAA"} {
		if _, err := parseProgress(0, md); !errors.Is(err, errForeignProgress) {
			t.Errorf("parse %q: %v, want errForeignProgress", md, err)
		}
	}
}

// TestProgressDiscards: discarded offsets are resolved, told apart from
// replayed ones, kept below next, dropped below the topic's oldest offset,
// merged by union, and written in the dlq2 format, which reads back;
// progress without discards keeps the dlq1 format that older versions
// read.
func TestProgressDiscards(t *testing.T) {
	p := progress{next: 10}
	p.add(12)
	if md, err := p.metadata(); err != nil || !strings.HasPrefix(md, progressPrefix) {
		t.Fatalf("metadata without discards: %q, %v; want the %s format", md, err, progressPrefix)
	}
	p.discard(11)
	p.discard(12) // replayed already: stays replayed
	p.discard(20)
	p.discard(10)
	if p.next != 13 || !slices.Equal(p.done, []span{{20, 21}}) || !slices.Equal(p.discarded, []span{{10, 12}, {20, 21}}) {
		t.Fatalf("after discards: next %d done %v discarded %v", p.next, p.done, p.discarded)
	}
	for off, want := range map[int64][2]bool{9: {true, false}, 10: {true, true}, 11: {true, true}, 12: {true, false}, 13: {false, false}, 20: {true, true}} {
		if p.has(off) != want[0] || p.isDiscarded(off) != want[1] {
			t.Errorf("offset %d: resolved %v discarded %v, want %v", off, p.has(off), p.isDiscarded(off), want)
		}
	}
	md, err := p.metadata()
	if err != nil || !strings.HasPrefix(md, discardPrefix) {
		t.Fatalf("metadata with discards: %q, %v; want the %s format", md, err, discardPrefix)
	}
	decoded, err := parseProgress(p.next, md)
	if err != nil || decoded.next != p.next || !slices.Equal(decoded.done, p.done) || !slices.Equal(decoded.discarded, p.discarded) {
		t.Fatalf("round trip of %q: %+v, %v; want %+v", md, decoded, err, p)
	}
	other := progress{next: 13, discarded: []span{{11, 12}, {30, 31}}, done: []span{{30, 31}}}
	decoded.union(other)
	if !slices.Equal(decoded.discarded, []span{{10, 12}, {20, 21}, {30, 31}}) || !slices.Equal(decoded.done, []span{{20, 21}, {30, 31}}) {
		t.Fatalf("union: done %v discarded %v", decoded.done, decoded.discarded)
	}
	decoded.floor(11)
	if !slices.Equal(decoded.discarded, []span{{11, 12}, {20, 21}, {30, 31}}) {
		t.Fatalf("floor(11): discarded %v, want what is below 11 dropped", decoded.discarded)
	}
	// Discards that a foreign commit does not count as resolved are.
	if odd, err := parseProgress(3, discardPrefix+".0.000000000AA0000"); err != nil || !odd.has(53) || !odd.isDiscarded(53) {
		t.Errorf("discards not among the resolved offsets: %+v, %v; want them resolved", odd, err)
	}
	for _, bad := range []string{discardPrefix, discardPrefix + "..", discardPrefix + ".x.AAAA", discardPrefix + ".-1.", discardPrefix + "!!!.10."} {
		if _, err := parseProgress(0, bad); !errors.Is(err, errForeignProgress) {
			t.Errorf("parse %q: %v, want errForeignProgress", bad, err)
		}
	}
}

func FuzzParseProgress(f *testing.F) {
	p := progress{next: 3, done: []span{{5, 9}, {12, 13}}}
	md, _ := p.metadata()
	f.Add(int64(3), md)
	f.Add(int64(0), "dlq1:")
	p.discard(4)
	p.discard(40)
	md, _ = p.metadata()
	f.Add(int64(3), md)
	f.Fuzz(func(t *testing.T, offset int64, md string) {
		p, err := parseProgress(offset, md)
		if err != nil {
			return
		}
		for i, s := range p.done {
			if s.lo <= p.next || s.hi <= s.lo || i > 0 && p.done[i-1].hi >= s.lo {
				t.Fatalf("parse(%d, %q) gives unnormalized spans: next %d done %v", offset, md, p.next, p.done)
			}
		}
		for i, s := range p.discarded {
			if s.hi <= s.lo || i > 0 && p.discarded[i-1].hi >= s.lo || !p.has(s.lo) {
				t.Fatalf("parse(%d, %q) gives unnormalized or unresolved discards: next %d done %v discarded %v", offset, md, p.next, p.done, p.discarded)
			}
		}
	})
}
