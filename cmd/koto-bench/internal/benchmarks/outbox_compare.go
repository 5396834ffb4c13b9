package benchmarks

import (
	"context"
	"time"
)

// OutboxThroughput is what CompareOutbox measured, summed over its rounds.
type OutboxThroughput struct {
	WatermillMessages, KotoMessages int
	Watermill, Koto                 time.Duration
}

// WatermillRate is Watermill's forwarder's msg/s.
func (r OutboxThroughput) WatermillRate() float64 { return rate(r.WatermillMessages, r.Watermill) }

// KotoRate is the outbox forwarder's msg/s.
func (r OutboxThroughput) KotoRate() float64 { return rate(r.KotoMessages, r.Koto) }

// Ratio is KotoRate / WatermillRate, or 0 when Watermill did nothing.
func (r OutboxThroughput) Ratio() float64 {
	if r.WatermillRate() == 0 {
		return 0
	}
	return r.KotoRate() / r.WatermillRate()
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// CompareOutbox runs rounds rounds: each fills the table with n messages,
// lets Watermill's forwarder forward the first watermill of them, then the
// outbox forwarder all n, from the same rows (Watermill's forwarder deletes
// nothing; the outbox forwarder deletes what it forwarded). Each side's
// count and time are those of Forwarded: running, start-up left out.
func CompareOutbox(ctx context.Context, b *Outbox, n, watermill, rounds int) (OutboxThroughput, error) {
	var r OutboxThroughput
	for range rounds {
		if _, err := b.Fill(ctx, n); err != nil {
			return r, err
		}
		w, err := b.ForwardWatermill(ctx, watermill)
		if err != nil {
			return r, err
		}
		r.Watermill += w.Time
		r.WatermillMessages += w.Messages
		k, err := b.ForwardKoto(ctx, n)
		if err != nil {
			return r, err
		}
		r.Koto += k.Time
		r.KotoMessages += k.Messages
	}
	return r, nil
}
