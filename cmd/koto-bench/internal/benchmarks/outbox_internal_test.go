package benchmarks

import (
	"testing"
	"time"
)

func TestSummariseOutbox(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := summariseOutbox(ds)
	if got.N != 100 || got.P50 != 51*time.Millisecond || got.P99 != 100*time.Millisecond || got.Max != 100*time.Millisecond {
		t.Fatalf("summariseOutbox = %+v", got)
	}
	if (summariseOutbox(nil) != OutboxLatency{}) {
		t.Fatal("empty input")
	}
	r := OutboxThroughput{WatermillMessages: 100, Watermill: time.Second, KotoMessages: 2000, Koto: time.Second}
	if r.Ratio() != 20 || r.KotoRate() != 2000 || (OutboxThroughput{}).Ratio() != 0 {
		t.Fatalf("rates: %v %v", r.Ratio(), r.KotoRate())
	}
}
