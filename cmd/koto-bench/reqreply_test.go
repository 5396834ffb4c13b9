package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
)

func TestParseReqReplyFlags(t *testing.T) {
	f, err := parseReqReplyFlags([]string{"-rounds", "10", "-warmup", "0", "-size", "64", "-brokers", "a:1, b:2"}, io.Discard)
	if err != nil || f.rounds != 10 || f.warmup != 0 || f.size != 64 || len(f.brokers) != 2 || f.brokers[1] != "b:2" {
		t.Fatalf("parseReqReplyFlags = %+v, %v", f, err)
	}
	if _, err := parseReqReplyFlags([]string{"-rounds", "0"}, io.Discard); err == nil {
		t.Fatal("zero rounds accepted")
	}
}

// TestPrintReqReply checks the table, the ratios, and the line printed
// above the guard. (The
// measurement itself runs in cqrs's BenchmarkRoundTrip; running it here
// would start sarama, whose metrics goroutine never stops.)
func TestPrintReqReply(t *testing.T) {
	res := benchmarks.ReqReplyResult{
		Rounds:   1,
		Raw:      benchmarks.Latency{Median: 200 * time.Microsecond},
		PingPong: benchmarks.Latency{Median: 390 * time.Microsecond},
		Reply:    benchmarks.Latency{Median: 450 * time.Microsecond},
	}
	res.PingPongRatio, res.ReplyRatio, res.ReplyHopsRatio = 1.95, 2.25, 1.15
	var out bytes.Buffer
	if err := printReqReply(&out, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"raw produce→consume", "request/reply (cqrs)", "2.25× raw (200 µs), shown; 1.15× two raw hops (390 µs), guard ≤ 1.25×",
		"the guard catches a regression; it is not a goal"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "above the guard") {
		t.Errorf("1.15× two hops reported above the guard:\n%s", out.String())
	}

	res.Reply.Median, res.ReplyHopsRatio = 500*time.Microsecond, 1.28
	out.Reset()
	if err := printReqReply(&out, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "above the guard") {
		t.Errorf("1.28× two hops not reported above the guard:\n%s", out.String())
	}
}
