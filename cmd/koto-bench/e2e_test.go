package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
)

func TestParseE2EFlags(t *testing.T) {
	f, err := parseE2EFlags([]string{"-messages", "100", "-rounds", "2", "-conns", "10", "-direct=false", "-brokers", "a:1, b:2"}, io.Discard)
	if err != nil || f.messages != 100 || f.rounds != 2 || f.conns != 10 || f.direct || len(f.brokers) != 2 || f.brokers[1] != "b:2" {
		t.Fatalf("parseE2EFlags = %+v, %v", f, err)
	}
	if f.telemetry || len(f.variants()) != len(benchmarks.E2EVariants()) {
		t.Errorf("telemetry variants without -telemetry: %+v", f.variants())
	}
	if f, err := parseE2EFlags([]string{"-telemetry"}, io.Discard); err != nil || len(f.variants()) != len(benchmarks.E2EVariants())+len(benchmarks.E2ETelemetryVariants()) {
		t.Errorf("-telemetry: %d variants, %v", len(f.variants()), err)
	}
	for _, bad := range [][]string{{"-messages", "0"}, {"-rounds", "0"}, {"-conns", "3"}} {
		if _, err := parseE2EFlags(bad, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestPrintE2E checks the table and the verdict lines. (The measurement
// itself runs in middleware's TestConsumerEndToEndVariants; running it here
// would start sarama, whose metrics goroutine never stops.)
func TestPrintE2E(t *testing.T) {
	variants := benchmarks.E2EVariants()
	results := make([]benchmarks.E2EResult, len(variants))
	for i, v := range variants {
		results[i] = benchmarks.E2EResult{Variant: v, Messages: 1000, Elapsed: time.Second}
	}
	byName := func(name string) *benchmarks.E2EResult {
		for i := range results {
			if results[i].Variant.Name == name {
				return &results[i]
			}
		}
		t.Fatalf("no variant %q", name)
		return nil
	}
	chm, tx := byName(benchmarks.E2EWriteCheckHandleMark), byName(benchmarks.E2EWriteTransactional)
	chm.Variant.Target, tx.Variant.Target = 0.8, 0.8    // targets of the printing, not of the variants
	chm.Elapsed, chm.Ratio = 1250*time.Millisecond, 0.8 // on target
	tx.Elapsed, tx.Ratio = 4*time.Second, 0.25          // below
	tx.MinRatio, tx.MaxRatio = 0.2, 0.3
	byName(benchmarks.E2EWriteOwnTx).Elapsed = 2 * time.Second
	deferred := byName(benchmarks.E2EWriteDeferred)
	deferred.Elapsed, deferred.Ratio, deferred.MinRatio, deferred.MaxRatio = 1250*time.Millisecond, 0.8, 0.8, 0.8
	var out bytes.Buffer
	if err := printE2E(&out, results); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	tv := benchmarks.E2ETelemetryVariants()
	tel := append(results,
		benchmarks.E2EResult{Variant: tv[1], Messages: 1000, Elapsed: 1100 * time.Millisecond}, // no-op with the SDK
		benchmarks.E2EResult{Variant: tv[3], Messages: 1000, Elapsed: 990 * time.Millisecond})  // no-op without telemetry
	if err := printE2E(&out, tel); err != nil {
		t.Fatal(err)
	}
	// no-op: 1000 µs per message; with the SDK 1100 µs, without the middleware 990 µs.
	for _, want := range []string{
		"telemetry with the SDK: +100.0 µs per message, no-op + telemetry (SDK) (1100.0 µs vs 1000.0 µs)",
		"telemetry on no provider: +10.0 µs per message, no-op, no telemetry middleware (1000.0 µs vs 990.0 µs)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	squeezed := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{"write + transactional 250 0.25 × write 0.20–0.30 ≥ 0.8", "no-op 1000 baseline -",
		"write + transactional vs write in own tx: 0.50", "write + transactional: 0.25 of write, below the 0.8 target"} {
		if !strings.Contains(squeezed, want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "check-handle-mark: 0.80") {
		t.Errorf("a ratio on target is reported below it:\n%s", out.String())
	}
}
