package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
)

func TestParseBatchFlags(t *testing.T) {
	f, profile, err := parseBatchFlags([]string{"-messages", "100", "-batch-messages", "2000", "-rounds", "2", "-latency", "1s",
		"-cpuprofile", "cpu.out", "-brokers", "a:1"}, io.Discard)
	if err != nil || f.messages != 100 || f.batchMessages != 2000 || f.rounds != 2 || f.latency != time.Second ||
		profile != "cpu.out" || len(f.brokers) != 1 {
		t.Fatalf("parseBatchFlags = %+v, %q, %v", f, profile, err)
	}
	for _, bad := range [][]string{{"-messages", "0"}, {"-batch-messages", "0"}, {"-rounds", "0"}, {"-latency", "0s"}} {
		if _, _, err := parseBatchFlags(bad, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// batchResults is a batch section's results, with their ratios: the
// per-message variants at 1 000 msg/s, the batch consumer at 4 000 (4× the
// per-message one, 0.5× raw pgx's batches at 8 000), check-handle-mark
// batches at 900 (0.9×) and the hot key's batches at 6 000 (6×); p99
// latency 60 ms.
func batchResults() batchResult {
	elapsed := map[string]time.Duration{benchmarks.E2ERawBatch: 125 * time.Millisecond, benchmarks.E2EBatchWriteTx: 250 * time.Millisecond,
		benchmarks.E2EBatchWriteCheckHandle: 1111 * time.Millisecond, benchmarks.E2EHotBatchWriteTx: 166 * time.Millisecond,
		benchmarks.E2EBatchWrite: 500 * time.Millisecond}
	var r batchResult
	for _, v := range benchmarks.E2EBatchVariants() {
		d, ok := elapsed[v.Name]
		if !ok {
			d = time.Second
		}
		r.results = append(r.results, benchmarks.E2EResult{Variant: v, Messages: 1000, Elapsed: d})
	}
	rates := map[string]float64{}
	for _, res := range r.results {
		rates[res.Variant.Name] = res.Rate()
	}
	for i, res := range r.results {
		if b := res.Variant.Baseline; b != "" {
			r.results[i].Ratio = res.Rate() / rates[b]
		}
		if b := res.Variant.Also; b != "" {
			r.results[i].AlsoRatio = res.Rate() / rates[b]
		}
	}
	r.latency = benchmarks.LatencyResult{Variant: r.results[4].Variant, Rate: 2000, Messages: 4000, P50: 40 * time.Millisecond, P99: 60 * time.Millisecond,
		CPU: benchmarks.CPU{Self: 200 * time.Millisecond, Postgres: 40 * time.Millisecond, Busy: 3 * time.Second, Cores: 4 * time.Second}}
	return r
}

func TestBatchFigures(t *testing.T) {
	got := map[string]string{}
	for _, f := range batchFigures(batchResults()) {
		got[f.name] = f.target.String() + " " + f.verdict()
	}
	for name, want := range map[string]string{
		"batch consumption, " + benchmarks.E2EBatchWriteTx + " vs " + benchmarks.E2EConcWriteTx:                                           "≥ 5× not met",
		"batch consumption, " + benchmarks.E2EBatchWriteTx + " vs " + benchmarks.E2ERawBatch:                                              "≥ 0.50× met",
		"batch consumption, " + benchmarks.E2EBatchWriteCheckHandle + " vs " + benchmarks.E2EConcWrite:                                    "≥ 0.80× met",
		"batch consumption, " + benchmarks.E2EBatchWriteCheckHandle + " vs " + benchmarks.E2EBatchWrite:                                   "- -",
		"batch consumption, " + benchmarks.E2EHotBatchWriteTx + " vs " + benchmarks.E2EHotConcWriteTx:                                     "≥ 5× met",
		"batch consumption, p99 produce to commit at 2000 msg/s (half its capacity), " + benchmarks.E2EBatchWriteTx + ", flush time 50ms": "≤ 70 ms met",
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
	if got["batch consumption, "+benchmarks.E2EBatchNoop+" vs "+benchmarks.E2ERawBatch] != "- -" {
		t.Errorf("the no-op batches have a target: %v", got)
	}
	if len(got) != 8 {
		t.Errorf("%d figures, want 8: %v", len(got), got)
	}
}

func TestPrintBatch(t *testing.T) {
	var out bytes.Buffer
	if err := printBatch(&out, batchResults()); err != nil {
		t.Fatal(err)
	}
	squeezed := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		benchmarks.E2EBatchWriteTx + " vs " + benchmarks.E2ERawBatch + ": 0.50 (per round 0.00–0.00, target ≥ 0.5)",
		benchmarks.E2EBatchWriteTx + ": 4.00 of " + benchmarks.E2EConcWriteTx + ", below the 5.0 target",
		"at 2000 msg/s (half its capacity), produce to commit: p50 40ms, p99 60ms (flush time 50ms; target ≤ 70ms)",
		"meanwhile, CPU µs/msg: this process (producer included) 50, PostgreSQL 10; machine busy 75 %",
	} {
		if !strings.Contains(squeezed, want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "of "+benchmarks.E2ERawBatch+", below") {
		t.Errorf("a ratio on target is reported below it:\n%s", out.String())
	}
}
