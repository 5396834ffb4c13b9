package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
)

// TestLockKeysAfterWriteIsRefused: once the transaction has written, its
// place in the outbox's order is fixed and LockKeys says so.
func TestLockKeysAfterWriteIsRefused(t *testing.T) {
	e := newEnv(t)
	tx, err := e.pool.Begin(kototest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if err := e.o.LockKeys(kototest.Context(t), tx, "a", "", "b", "a"); err != nil {
		t.Fatalf("LockKeys before any write: %v", err)
	}
	if err := e.o.LockKeys(kototest.Context(t), tx); err != nil {
		t.Fatalf("LockKeys of no key: %v", err)
	}
	if err := e.o.Publisher(tx).Publish(kototest.Topic(t, "t"), newMsg("x", "a")); err != nil {
		t.Fatal(err)
	}
	if err := e.o.LockKeys(kototest.Context(t), tx, "c"); !errors.Is(err, outbox.ErrKeyLockAfterWrite) {
		t.Fatalf("LockKeys after a write = %v, want ErrKeyLockAfterWrite", err)
	}
	if err := e.o.LockKeys(kototest.Context(t), nil, "c"); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Fatalf("LockKeys(nil tx) = %v, want ErrNoTransaction", err)
	}
}

// TestLockKeysNoDeadlock: transactions locking the same keys in opposite
// orders never deadlock.
func TestLockKeysNoDeadlock(t *testing.T) {
	e := newEnv(t)
	keys := []string{"k1", "k2", "k3", "k4", "k5"}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				ks := keys
				if (g+i)%2 == 1 {
					ks = []string{"k5", "k4", "k3", "k2", "k1"}
				}
				err := e.o.Transact(kototest.Context(t), func(ctx context.Context, tx pgx.Tx) error {
					return e.o.LockKeys(ctx, tx, ks...)
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestXidOrderInversion stages the inversion step by step: T2 writes
// first, T1 publishes A and commits, then T2 publishes B and commits.
// Without key locks Kafka gets B before A, against the commit order. With
// LockKeys taken first, T1 waits for T2, and Kafka's order is the commit
// order.
func TestXidOrderInversion(t *testing.T) {
	e := newEnv(t)
	pgtest.Exec(t, e.pool, "CREATE TABLE "+e.schema+".side (id bigserial PRIMARY KEY)")
	e.startForwarder(e.forwarderConfig())

	t.Run("without key lock", func(t *testing.T) {
		topic := kototest.Topic(t, "inversion")
		r := newReader(t, e.brokers, topic)
		t2 := begin(t, e)
		pgtest.Exec(t, t2, "INSERT INTO "+e.schema+".side DEFAULT VALUES") // T2 gets its xid
		e.publish(topic, newMsg("A", "k"))                                 // T1, committed first
		publishIn(t, e, t2, topic, newMsg("B", "k"))
		commit(t, t2)
		if got := payloadsOf(r.next(2)); got != "B,A" {
			t.Fatalf("Kafka order %s; want B,A: the inversion did not happen", got)
		}
	})

	t.Run("with key lock", func(t *testing.T) {
		topic := kototest.Topic(t, "ordered")
		r := newReader(t, e.brokers, topic)
		t2 := begin(t, e)
		if err := e.o.LockKeys(kototest.Context(t), t2, "k"); err != nil {
			t.Fatal(err)
		}
		pgtest.Exec(t, t2, "INSERT INTO "+e.schema+".side DEFAULT VALUES")
		t1Done := make(chan error, 1)
		go func() {
			t1Done <- e.o.Transact(kototest.Context(t), func(ctx context.Context, tx pgx.Tx) error {
				if err := e.o.LockKeys(ctx, tx, "k"); err != nil {
					return err
				}
				return e.o.Publisher(tx).Publish(topic, newMsg("A", "k"))
			})
		}()
		kototest.WaitFor(t, "T1 to wait for the key lock", func() bool {
			var waiting int
			_ = e.pool.QueryRow(kototest.Context(t), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").Scan(&waiting)
			return waiting > 0
		})
		publishIn(t, e, t2, topic, newMsg("B", "k"))
		commit(t, t2) // T2 commits first, then T1
		if err := <-t1Done; err != nil {
			t.Fatal(err)
		}
		if got := payloadsOf(r.next(2)); got != "B,A" {
			t.Fatalf("Kafka order %s; want B,A, the commit order", got)
		}
	})
}

// TestKeyOrderUnderLoad runs 4 goroutines × 1 000 transactions over 20
// keys, a tenth of them rolled back. Each transaction writes a side row
// first, then bumps its key's counter (whose row lock serialises one key's
// transactions, so the counter values are that key's commit order), then
// publishes the value with the key as partition key. Without key locks,
// some keys' values reach Kafka out of order; with LockKeys first, every
// key's values arrive as 1, 2, 3, … with nothing lost and nothing of a
// rolled-back transaction.
func TestKeyOrderUnderLoad(t *testing.T) {
	perWorker := 1000
	if testing.Short() {
		perWorker = 250
	}
	e := newEnv(t)
	pgtest.Exec(t, e.pool, "CREATE TABLE "+e.schema+".side (id bigserial PRIMARY KEY)")
	pgtest.Exec(t, e.pool, "CREATE TABLE "+e.schema+".seq (key text PRIMARY KEY, n int NOT NULL)")
	e.startForwarder(e.forwarderConfig())
	for _, lock := range []bool{false, true} {
		t.Run(fmt.Sprintf("lock=%v", lock), func(t *testing.T) {
			pgtest.Exec(t, e.pool, "TRUNCATE "+e.schema+".seq")
			pgtest.Exec(t, e.pool, "INSERT INTO "+e.schema+".seq SELECT 'key-' || i, 0 FROM generate_series(0, 19) AS i")
			topic := kototest.Topic(t, "load")
			r := newReader(t, e.brokers, topic)
			committed := runLoad(t, e, topic, lock, 4, perWorker)
			inversions := checkKeyOrder(t, r.next(len(committed)), committed)
			t.Logf("%d transactions committed, %d per-key inversions on Kafka", len(committed), inversions)
			switch {
			case lock && inversions > 0:
				t.Errorf("%d inversions with key locks", inversions)
			case !lock && inversions == 0:
				t.Errorf("no inversion without key locks: the load did not reproduce it")
			}
			r.none(2 * testPoll)
		})
	}
}

// runLoad runs the transactions of TestKeyOrderUnderLoad and returns the
// committed ones: message UUID → "key/n".
func runLoad(t *testing.T, e *env, topic string, lock bool, workers, perWorker int) map[string]string {
	var mu sync.Mutex
	committed := map[string]string{}
	errRollback := errors.New("rollback")
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range perWorker {
				key := "key-" + strconv.Itoa(rng.IntN(20))
				rollback := rng.IntN(10) == 0
				pause := time.Duration(rng.IntN(1000)) * time.Microsecond
				var id, value string
				err := e.o.Transact(kototest.Context(t), func(ctx context.Context, tx pgx.Tx) error {
					if lock {
						if err := e.o.LockKeys(ctx, tx, key); err != nil {
							return err
						}
					}
					if _, err := tx.Exec(ctx, "INSERT INTO "+e.schema+".side DEFAULT VALUES"); err != nil {
						return err
					}
					time.Sleep(pause)
					var n int
					if err := tx.QueryRow(ctx, "UPDATE "+e.schema+".seq SET n = n + 1 WHERE key = $1 RETURNING n", key).Scan(&n); err != nil {
						return err
					}
					value = key + "/" + strconv.Itoa(n)
					msg := newMsg(value, key)
					id = msg.UUID
					if err := e.o.Publisher(tx).Publish(topic, msg); err != nil {
						return err
					}
					if rollback {
						return errRollback
					}
					return nil
				})
				switch {
				case err == nil:
					mu.Lock()
					committed[id] = value
					mu.Unlock()
				case !errors.Is(err, errRollback):
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return committed
}

// checkKeyOrder checks that recs are exactly the committed messages, each
// once, and counts the places where a key's value is lower than the one
// before it on Kafka.
func checkKeyOrder(t *testing.T, recs []record, committed map[string]string) (inversions int) {
	t.Helper()
	seen := map[string]bool{}
	last := map[string]int{}
	for _, rec := range recs {
		want, ok := committed[rec.UUID]
		if !ok || want != rec.Payload {
			t.Fatalf("record %s %q was not committed (want %q)", rec.UUID, rec.Payload, want)
		}
		if seen[rec.UUID] {
			t.Fatalf("record %s %q arrived twice", rec.UUID, rec.Payload)
		}
		seen[rec.UUID] = true
		key, num, _ := strings.Cut(rec.Payload, "/")
		n, _ := strconv.Atoi(num)
		if rec.Key != key {
			t.Fatalf("record %q has Kafka key %q", rec.Payload, rec.Key)
		}
		if n < last[key] {
			inversions++
		}
		last[key] = max(last[key], n)
	}
	return inversions
}

func begin(t *testing.T, e *env) pgx.Tx {
	t.Helper()
	return beginOn(t, e.pool)
}

func publishIn(t *testing.T, e *env, tx pgx.Tx, topic string, msg ...*message.Message) {
	t.Helper()
	if err := e.o.Publisher(tx).Publish(topic, msg...); err != nil {
		t.Fatal(err)
	}
}

func commit(t *testing.T, tx pgx.Tx) {
	t.Helper()
	if err := tx.Commit(kototest.Context(t)); err != nil {
		t.Fatal(err)
	}
}

func payloadsOf(recs []record) string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Payload
	}
	return strings.Join(out, ",")
}
