package kototest

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/internal/kafkatest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// CutPostgres cuts every connection to the database and refuses new ones,
// as a database that went away, until [Harness.RestorePostgres]. The
// harness needs [WithPostgresFaults].
func (h *Harness) CutPostgres() {
	h.t.Helper()
	h.needProxy().Cut()
}

// RestorePostgres lets connections to the database through again.
func (h *Harness) RestorePostgres() {
	h.t.Helper()
	h.needProxy().Restore()
}

// SlowPostgres delays every read from and write to the database by d each
// way, as a database far away, until [Harness.RestorePostgres].
func (h *Harness) SlowPostgres(d time.Duration) {
	h.t.Helper()
	h.needProxy().SetDelay(d)
}

func (h *Harness) needProxy() *pgtest.Proxy {
	h.t.Helper()
	if h.proxy == nil {
		h.t.Fatalf("kototest: the harness has no database proxy; start it with kototest.WithPostgresFaults()")
	}
	return h.proxy
}

// Stall is a fault of the broker: requests of one kind left unanswered,
// as a broker that hangs, until [Stall.Release].
type Stall struct{ s *kafkatest.Stall }

// StallKafka makes the broker leave every request of key (kmsg.Produce,
// kmsg.Fetch, kmsg.ListOffsets, …) that names one of topics unanswered
// until Release or the end of the test. Clients wait for the answers
// until their own timeouts, then retry.
func (h *Harness) StallKafka(key kmsg.Key, topics ...string) *Stall {
	h.t.Helper()
	return &Stall{s: kafkatest.StallRequests(h.t, h.kafka, key, topics...)}
}

// Stalled returns a channel that receives a value as each request is left
// unanswered (it keeps up to 64).
func (s *Stall) Stalled() <-chan struct{} { return s.s.Stalled }

// Count returns how many requests were left unanswered.
func (s *Stall) Count() int { return s.s.Count() }

// Release makes the broker answer the requests that come from now on.
func (s *Stall) Release() { s.s.Release() }
