package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
)

func TestParseOutboxFlags(t *testing.T) {
	f, err := parseOutboxFlags([]string{"-messages", "100", "-watermill-messages", "10", "-rounds", "2",
		"-latency-messages", "5", "-interval", "2ms", "-brokers", "a:1"}, io.Discard)
	if err != nil || f.messages != 100 || f.watermill != 10 || f.rounds != 2 || f.latency != 5 ||
		f.interval != 2*time.Millisecond || len(f.brokers) != 1 {
		t.Fatalf("parseOutboxFlags = %+v, %v", f, err)
	}
	for _, args := range [][]string{{"-messages", "0"}, {"-messages", "10", "-watermill-messages", "11"}, {"-interval", "0s"}} {
		if _, err := parseOutboxFlags(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestPrintOutbox checks the tables and the verdict lines. (The
// measurement itself runs in the outbox package's BenchmarkForwarder;
// running it here would start sarama, whose metrics goroutine never
// stops.)
func TestPrintOutbox(t *testing.T) {
	var out bytes.Buffer
	slow := benchmarks.OutboxThroughput{WatermillMessages: 1000, Watermill: time.Second, KotoMessages: 5000, Koto: time.Second}
	if err := printOutboxThroughput(&out, slow); err != nil {
		t.Fatal(err)
	}
	lat := []outboxLatencyRow{{"outbox forwarder, NOTIFY", benchmarks.OutboxLatency{N: 10, P50: time.Millisecond, P99: 12 * time.Millisecond, Max: 20 * time.Millisecond}}}
	if err := printOutboxLatency(&out, lat); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Watermill forwarder on watermill-sql", "5.0", "below the target: 5.0×", "p99 12.00 ms, above the target"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParseScheduleFlags(t *testing.T) {
	f, err := parseScheduleFlags([]string{"-lateness-messages", "100", "-spread", "2s", "-due", "5000", "-brokers", "a:1"}, io.Discard)
	if err != nil || f.late != 100 || f.spread != 2*time.Second || f.due != 5000 || len(f.brokers) != 1 {
		t.Fatalf("parseScheduleFlags = %+v, %v", f, err)
	}
	for _, args := range [][]string{{"-due", "0"}, {"-spread", "0s"}, {"-lateness-messages", "-1"}} {
		if _, err := parseScheduleFlags(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestPrintSchedule checks the tables and the verdict line.
func TestPrintSchedule(t *testing.T) {
	var out bytes.Buffer
	r := scheduleResult{
		late: benchmarks.ScheduleLateness{Consumed: benchmarks.OutboxLatency{P50: 3 * time.Millisecond, P99: 70 * time.Millisecond}},
		fire: benchmarks.FireResult{Messages: 1000, Raw: 10 * time.Millisecond, Fired: 200 * time.Millisecond, Forwarded: 300 * time.Millisecond},
	}
	if err := printSchedule(&out, scheduleFlags{late: 10, spread: time.Second}, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"raw INSERT … SELECT", "forwarder: schedule empty", "5000", "below the target: lateness p99 70.00 ms, 5000 fires/s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
