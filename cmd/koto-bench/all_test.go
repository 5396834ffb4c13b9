package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
)

func TestFigureVerdict(t *testing.T) {
	for _, c := range []struct {
		f    figure
		want string
	}{
		{figure{value: 90, baseline: 100, target: atLeast(0.9)}, "met"},
		{figure{value: 89, baseline: 100, target: atLeast(0.9)}, "not met"},
		{figure{value: 2, baseline: 1, target: atMost(2)}, "met"},
		{figure{value: 2.1, baseline: 1, target: atMost(2)}, "not met"},
		{figure{value: 5, target: atLeast(1)}, "not met"}, // no baseline to compare with
		{figure{value: 9.9, target: target{cmp: "<", bound: 10, ofValue: true, unit: "ms"}}, "met"},
		{figure{value: 10, target: target{cmp: "<", bound: 10, ofValue: true, unit: "ms"}}, "not met"},
		{figure{value: 3, baseline: 1}, "-"},
		{figure{value: 1.25, baseline: 1, target: guardAtMost(1.25)}, "met"},
		{figure{value: 1.26, baseline: 1, target: guardAtMost(1.25)}, "not met"},
	} {
		if got := c.f.verdict(); got != c.want {
			t.Errorf("%+v: verdict %q, want %q", c.f, got, c.want)
		}
	}
}

func TestPrintFigures(t *testing.T) {
	var out bytes.Buffer
	err := printFigures(&out, []figure{
		{name: "fast thing vs slow thing", value: 1500, baseline: 1000, unit: "ops/s", target: atLeast(0.9)},
		{name: "slow thing vs fast thing", value: 500, baseline: 1000, unit: "ops/s", target: atLeast(0.9)},
		{name: "latency", value: 12.5, unit: "ms", target: target{cmp: "<", bound: 10, ofValue: true, unit: "ms"}},
		{name: "guarded", value: 130, baseline: 100, unit: "µs", target: guardAtMost(1.25), note: "not a goal"},
		{name: "shown", value: 3, baseline: 1, unit: "µs"},
	})
	if err != nil {
		t.Fatal(err)
	}
	squeezed := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		"fast thing vs slow thing 1500 ops/s 1000 ops/s 1.50 ≥ 0.90× met",
		"slow thing vs fast thing 500 ops/s 1000 ops/s 0.50 ≥ 0.90× not met",
		"latency 12.5 ms - - < 10 ms not met",
		"guarded 130 µs 100 µs 1.30 guard ≤ 1.25× not met",
		"shown 3 µs 1 µs 3.00 - -",
		"guarded: not a goal",
	} {
		if !strings.Contains(squeezed, want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestAllRunsSectionsAndGoesOnAfterAFailure runs two sections, the first
// failing, and checks that the second's figures are printed, the failure
// shows as a figure not met, and the error is returned.
func TestAllRunsSectionsAndGoesOnAfterAFailure(t *testing.T) {
	boom := errors.New("boom")
	sections := []section{
		{"bad", func(context.Context) ([]figure, error) { return nil, boom }},
		{"good", func(context.Context) ([]figure, error) {
			return []figure{{name: "good figure", value: 2, baseline: 1, unit: "x", target: atLeast(1)}}, nil
		}},
	}
	figs, took, errs := runSections(t.Context(), sections)
	if len(figs) != 2 || len(took) != 2 || len(errs) != 1 || !errors.Is(errs[0], boom) {
		t.Fatalf("figures %+v, took %v, errors %v", figs, took, errs)
	}
	if figs[0].verdict() != "not met" || !strings.Contains(figs[0].name, "bad: failed, boom") || figs[1].verdict() != "met" {
		t.Fatalf("figures %+v", figs)
	}
	if _, err := pick(sections, "good, nope"); err == nil {
		t.Fatal("an unknown section was accepted")
	}
	if got, err := pick(sections, "good"); err != nil || len(got) != 1 || got[0].name != "good" {
		t.Fatalf("pick(good) = %v, %v", got, err)
	}
}

// TestAllQuickWithoutKafka runs the all subcommand's quick sizes for the
// sections that need neither Kafka nor PostgreSQL and checks that it
// prints one line per figure with a verdict. (The Kafka sections start
// sarama, whose metrics goroutine never stops; their tables are checked in
// the other subcommands' tests.)
func TestAllQuickWithoutKafka(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"all", "-quick", "-only", "memory,allocs"}, &out); err != nil {
		t.Fatalf("all: %v\n%s", err, out.String())
	}
	lines := figureLines(out.String())
	if len(lines) != 5+6 {
		t.Fatalf("%d figure lines, want 5 memory and 6 allocation figures:\n%s", len(lines), out.String())
	}
	for _, l := range lines[:4] {
		verdict := strings.HasSuffix(l, " met") || strings.HasSuffix(l, "not met")
		if dup := strings.Contains(l, "duplicates"); verdict == dup {
			t.Errorf("memory figure %q: a verdict on new keys, none on duplicates (no target)", l)
		}
	}
	if !strings.Contains(out.String(), "sections: memory") || !strings.Contains(out.String(), "no Kafka") {
		t.Errorf("unexpected output:\n%s", out.String())
	}
}

// figureLines returns the lines of a figures table below its header.
func figureLines(s string) []string {
	var lines []string
	in := false
	for _, l := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(l, "figure "):
			in = true
		case in && strings.TrimSpace(l) == "":
			in = false
		case in:
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return lines
}

// TestSectionFigures checks that each section turns its results into the
// figures and targets of the performance issue.
func TestSectionFigures(t *testing.T) {
	var figs []figure
	figs = append(figs, storeFigures([]benchmarks.StoreResult{{Callers: 1, Raw: 100, Store: 95}, {Callers: 16, Raw: 100, Store: 80}})...)
	variants := benchmarks.E2EVariants()
	e2e := make([]benchmarks.E2EResult, len(variants))
	for i, v := range variants {
		e2e[i] = benchmarks.E2EResult{Variant: v, Messages: 1000, Elapsed: time.Second}
	}
	e2e[1].Elapsed = 2 * time.Second // check-handle-mark at half the baseline's rate
	figs = append(figs, e2eFigures(e2e)...)
	figs = append(figs, concurrentFigures(concurrentResults())...)
	figs = append(figs, outboxFigures(outboxResult{
		throughput: benchmarks.OutboxThroughput{WatermillMessages: 100, Watermill: time.Second, KotoMessages: 6000, Koto: time.Second},
		latency: []outboxLatencyRow{
			{"notify", benchmarks.OutboxLatency{P50: time.Millisecond, P99: 5 * time.Millisecond}},
			{"poll", benchmarks.OutboxLatency{P50: 500 * time.Millisecond, P99: time.Second}},
			{"watermill", benchmarks.OutboxLatency{P50: 500 * time.Millisecond, P99: time.Second}},
		},
	})...)
	figs = append(figs, scheduleFigures(scheduleResult{
		late: benchmarks.ScheduleLateness{Consumed: benchmarks.OutboxLatency{P50: 3 * time.Millisecond, P99: 60 * time.Millisecond}},
		fire: benchmarks.FireResult{Messages: 1000, Raw: 10 * time.Millisecond, Fired: 50 * time.Millisecond},
	})...)
	figs = append(figs, reqreplyFigures(benchmarks.ReqReplyResult{Raw: benchmarks.Latency{Median: 100 * time.Microsecond},
		PingPong: benchmarks.Latency{Median: 200 * time.Microsecond}, Reply: benchmarks.Latency{Median: 210 * time.Microsecond}})...)
	got := map[string]string{}
	for _, f := range figs {
		got[f.name] = f.target.String() + " " + f.verdict()
	}
	for name, want := range map[string]string{
		"store check+mark, 1 caller vs raw pgx":                                                                 "≥ 0.90× met",
		"store check+mark, 16 callers vs raw pgx":                                                               "≥ 0.90× not met",
		"consumer end to end, write + check-handle-mark vs write":                                               "- -",
		"consumer end to end, write + transactional vs write":                                                   "- -",
		"consumer end to end, no-op + check-handle-mark vs no-op":                                               "- -",
		"concurrent consumption, " + benchmarks.E2EConcWriteTx + " vs " + benchmarks.E2ERawTransactional:        "≥ 0.70× met",
		"concurrent consumption, " + benchmarks.E2EConcWriteCheckHandle + " vs " + benchmarks.E2EConcWrite:      "- -",
		"concurrent consumption, " + benchmarks.E2EConcWrite + " vs " + benchmarks.E2EWrite:                     "- -",
		"concurrent consumption, " + benchmarks.E2ERemoteConcWriteTx + " vs " + benchmarks.E2ERemoteWrite:       "≥ 2× met",
		"concurrent consumption, " + benchmarks.E2EConcWaitCheckHandle + " vs " + benchmarks.E2EWaitCheckHandle: "≥ 20× not met",
		"concurrent consumption, p99 latency at 500 msg/s (half of one at a time's), " +
			benchmarks.E2EConcWriteTx + " vs " + benchmarks.E2EWriteTransactional: "≤ 1× met",
		"outbox forwarder throughput vs Watermill forwarder":                    "≥ 10× met",
		"outbox forwarder throughput":                                           "≥ 5000 msg/s met",
		"commit-to-Kafka p99, notify vs watermill":                              "< 10 ms met",
		"commit-to-Kafka p99, poll vs watermill":                                "- -",
		"scheduled lateness p50, due to consumed":                               "- -",
		"scheduled lateness p99, due to consumed":                               "≤ 50 ms not met",
		"scheduled fires, 1000 due at once, vs raw INSERT … SELECT of the rows": "- -",
		"scheduled fires, 1000 due at once":                                     "≥ 10000 msg/s met",
		"request/reply median vs raw produce→consume":                           "- -",
		"request/reply median vs two raw hops":                                  "guard ≤ 1.25× met",
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
}

// concurrentResults is a concurrent section's results: each variant at
// 1 000 msg/s, but the raw pgx baseline at 1 250 (0.8 for the consumer),
// the concurrent check-handle-mark at 500 (0.5, no target), the remote consumer at
// 2 500 (2.5) and the waiting one at 10 000 (10); latencies 20 ms one at a
// time, 10 ms concurrent.
func concurrentResults() concurrentResult {
	var r concurrentResult
	rate := map[string]time.Duration{benchmarks.E2ERawTransactional: 800 * time.Millisecond, benchmarks.E2EConcWriteCheckHandle: 2 * time.Second,
		benchmarks.E2ERemoteConcWriteTx: 400 * time.Millisecond, benchmarks.E2EConcWaitCheckHandle: 100 * time.Millisecond}
	local, remote, waiting := concurrentGroups()
	results := func(vs []benchmarks.E2EVariant) []benchmarks.E2EResult {
		out := make([]benchmarks.E2EResult, len(vs))
		for i, v := range vs {
			out[i] = benchmarks.E2EResult{Variant: v, Messages: 1000, Elapsed: cmp.Or(rate[v.Name], time.Second)}
		}
		return out
	}
	r.local, r.remote, r.waiting = results(local), results(remote), results(waiting)
	r.latency = []benchmarks.LatencyResult{{Variant: local[2], Rate: 500, P99: 20 * time.Millisecond}, {Variant: local[4], Rate: 500, P99: 10 * time.Millisecond}}
	return r
}
