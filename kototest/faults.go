package kototest

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// CutPostgres cuts every connection to the database and refuses new ones,
// as a database that went away, until [Harness.RestorePostgres]. The
// harness needs [WithPostgresFaults].
func (h *Harness) CutPostgres() {
	h.t.Helper()
	h.needProxy().Cut()
}

// RestorePostgres lets connections to the database through again, and
// without delay.
func (h *Harness) RestorePostgres() {
	h.t.Helper()
	h.needProxy().Restore()
}

// SlowPostgres delays every read from and write to the database, on open
// connections and new ones, by d each way, as a database far away, until
// [Harness.RestorePostgres]. It needs [WithPostgresFaults].
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

// StallKafka stalls the requests of key that name one of topics on the
// harness's broker, as [StallRequests] does.
func (h *Harness) StallKafka(key kmsg.Key, topics ...string) *Stall {
	h.t.Helper()
	return StallRequests(h.t, h.kafka, key, topics...)
}
