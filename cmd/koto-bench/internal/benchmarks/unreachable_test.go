package benchmarks

import (
	"testing"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// TestNoKafka: with no broker listening, the set-ups that connect clean up
// what they made and report the refused connection.
func TestNoKafka(t *testing.T) {
	ctx := kototest.Context(t)
	brokers := []string{kototest.ClosedAddr(t)}

	rr, err := NewReqReply(ctx, brokers, "no-kafka", 16)
	if rr != nil {
		t.Error("NewReqReply returned a set-up with its error")
	}
	kototest.WantRefused(t, "NewReqReply", err)

	pool := pgtest.Pool(t)
	schema := pgtest.Name("no_kafka")
	e, err := NewE2E(ctx, brokers, pool, schema)
	if e != nil {
		t.Error("NewE2E returned a set-up with its error")
	}
	kototest.WantRefused(t, "NewE2E", err)
	if n := pgtest.QueryInt(t, pool, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema); n != 0 {
		t.Errorf("NewE2E left its schema %s behind", schema)
	}
}
