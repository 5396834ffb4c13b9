package postgres_test

import (
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// TestRestartSurvival marks keys through one Store and pool, closes both,
// and reads the marks through a new Store on a new pool: what a redeploy
// does.
func TestRestartSurvival(t *testing.T) {
	schema := pgtest.Schema(t, pgtest.Pool(t))
	cfg := postgres.Config{Schema: schema}
	marked := keys("orders.order-placed/0", 50)

	pool1 := pgtest.Pool(t)
	before := newStore(t, pool1, cfg)
	mustMark(t, before, marked...)
	if err := before.Close(); err != nil {
		t.Fatal(err)
	}
	pool1.Close()

	after := newStore(t, pgtest.Pool(t), cfg)
	for _, k := range marked {
		if !isProcessed(t, after, k) {
			t.Fatalf("%s was marked before the restart and is not processed after it", k)
		}
	}
	if isProcessed(t, after, "orders.order-placed/0/999") {
		t.Fatal("a key never marked is processed")
	}
}

func TestMarkTwiceAndKeyIdentity(t *testing.T) {
	pool := pgtest.Pool(t)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	id := newUUIDKey()
	mustMark(t, s, id, id) // marking twice is fine
	if n := pgtest.QueryInt(t, pool, "SELECT count(*) FROM "+s.Table()+" WHERE message_id = $1", id); n != 1 {
		t.Fatalf("%d rows for a message UUID marked twice, want 1 stored under the UUID itself", n)
	}
	if !isProcessed(t, s, id) {
		t.Fatal("marked key not processed")
	}
}

// TestWindow sets marks back in time with SQL: a mark older than the window
// does not count, a younger one does, and marking an expired key renews it,
// whether or not any cleanup ran.
func TestWindow(t *testing.T) {
	pool := pgtest.Pool(t)
	s := newStore(t, pool, postgres.Config{Schema: pgtest.Schema(t, pool), Window: time.Hour})
	mustMark(t, s, "old", "young", "fresh")
	ageMark(t, pool, s, "old", time.Hour+time.Second)
	ageMark(t, pool, s, "young", time.Hour-time.Minute)
	if isProcessed(t, s, "old") {
		t.Fatal("a mark older than the window counts")
	}
	if !isProcessed(t, s, "young") || !isProcessed(t, s, "fresh") {
		t.Fatal("a mark younger than the window does not count")
	}
	mustMark(t, s, "old")
	if !isProcessed(t, s, "old") {
		t.Fatal("marking an expired key again did not renew its mark")
	}
	mustMark(t, s, "young")
	young := pgtest.QueryInt(t, pool, "SELECT extract(epoch FROM now() - processed_at)::bigint FROM "+s.Table()+" WHERE message_id = $1", keyUUID("young"))
	if young < int64((time.Hour - 2*time.Minute).Seconds()) {
		t.Fatalf("marking a fresh key again moved its mark (now %d s old)", young)
	}
}
