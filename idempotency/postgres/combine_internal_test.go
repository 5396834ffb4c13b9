package postgres

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// gatedSend is a combiner's send that records the keys of each statement
// and holds the first until released.
type gatedSend struct {
	mu      sync.Mutex
	batches [][][16]byte
	ctxs    []context.Context
	entered chan struct{} // closed when the first statement is held
	release chan struct{}
	fail    func(batch int) error
	once    sync.Once
}

func newGatedSend() *gatedSend {
	return &gatedSend{entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedSend) send(ctx context.Context, keys []pgtype.UUID) (map[[16]byte]bool, error) {
	g.mu.Lock()
	n := len(g.batches)
	batch := make([][16]byte, 0, len(keys))
	found := map[[16]byte]bool{}
	for _, k := range keys {
		batch = append(batch, k.Bytes)
		found[k.Bytes] = k.Bytes[0]%2 == 1 // odd keys are "found"
	}
	g.batches = append(g.batches, batch)
	g.ctxs = append(g.ctxs, ctx)
	g.mu.Unlock()
	if n == 0 {
		g.once.Do(func() { close(g.entered) })
		<-g.release
	}
	if g.fail != nil {
		if err := g.fail(n); err != nil {
			return nil, err
		}
	}
	return found, nil
}

func (g *gatedSend) recorded() [][][16]byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.batches)
}

// waitQueued waits until n calls wait in c.
func waitQueued(t *testing.T, c *combiner, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		queued := len(c.waiting)
		c.mu.Unlock()
		if queued == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want %d", queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func key(b byte) [16]byte { return [16]byte{b} }

type result struct {
	key   [16]byte
	found bool
	err   error
}

// TestCombinerGroupsWaitingCalls: calls that arrive while a statement is
// in flight go together in the next one, their keys distinct and in
// ascending order, and each gets its own answer.
func TestCombinerGroupsWaitingCalls(t *testing.T) {
	g := newGatedSend()
	c := &combiner{send: g.send, limit: 1}
	results := make(chan result, 10)
	run := func(k [16]byte) {
		found, err := c.do(context.Background(), k)
		results <- result{k, found, err}
	}
	go run(key(100))
	<-g.entered
	for _, b := range []byte{9, 3, 4, 3, 8, 1, 7, 2} { // 3 twice: one key per statement
		go run(key(b))
	}
	waitQueued(t, c, 8)
	close(g.release)
	for range 9 {
		r := <-results
		if r.err != nil || r.found != (r.key[0]%2 == 1) {
			t.Errorf("key %d: found %v, %v", r.key[0], r.found, r.err)
		}
	}
	want := [][][16]byte{{key(100)}, {key(1), key(2), key(3), key(4), key(7), key(8), key(9)}}
	if got := g.recorded(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("statements %v, want %v", got, want)
	}
}

// TestCombinerFailedStatement: every call of a failed statement gets its
// error; the next statement is sent as usual.
func TestCombinerFailedStatement(t *testing.T) {
	g := newGatedSend()
	boom := errors.New("statement failed")
	g.fail = func(batch int) error {
		if batch == 1 {
			return boom
		}
		return nil
	}
	c := &combiner{send: g.send, limit: 1}
	results := make(chan result, 4)
	run := func(k [16]byte) {
		found, err := c.do(context.Background(), k)
		results <- result{k, found, err}
	}
	go run(key(1))
	<-g.entered
	go run(key(2))
	go run(key(3))
	waitQueued(t, c, 2)
	close(g.release)
	for range 3 {
		r := <-results
		if failed := r.key[0] != 1; failed != errors.Is(r.err, boom) {
			t.Errorf("key %d: %v", r.key[0], r.err)
		}
	}
	if found, err := c.do(context.Background(), key(5)); err != nil || !found {
		t.Fatalf("call after the failed statement: %v, %v", found, err)
	}
}

// TestCombinerCancelledCalls: a waiting call whose context ends returns
// its error and its key is not sent; the others go on.
func TestCombinerCancelledCalls(t *testing.T) {
	g := newGatedSend()
	c := &combiner{send: g.send, limit: 1}
	results := make(chan result, 4)
	do := func(ctx context.Context, k [16]byte) {
		found, err := c.do(ctx, k)
		results <- result{k, found, err}
	}
	go do(context.Background(), key(1))
	<-g.entered
	waiterCtx, cancelWaiter := context.WithCancel(context.Background())
	go do(waiterCtx, key(2))
	waitQueued(t, c, 1)
	go do(context.Background(), key(3))
	waitQueued(t, c, 2)
	cancelWaiter()
	if r := <-results; r.key != key(2) || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled waiter: key %d, %v", r.key[0], r.err)
	}
	close(g.release)
	for range 2 {
		if r := <-results; r.err != nil || r.found != (r.key[0]%2 == 1) {
			t.Errorf("key %d: %v, %v", r.key[0], r.found, r.err)
		}
	}
	want := [][][16]byte{{key(1)}, {key(3)}}
	if got := g.recorded(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("statements %v, want %v", got, want)
	}
}

// TestBatchContext: a call alone sends with its own context; a statement
// of several calls is not cancelled with any of them and runs to their
// latest deadline, or without one if a call has none.
func TestBatchContext(t *testing.T) {
	own, cancelOwn := context.WithCancel(context.Background())
	if ctx, _ := batchContext([]*call{{ctx: own}}); ctx != own {
		t.Fatal("a call alone does not send with its own context")
	}
	early, cancelEarly := context.WithTimeout(context.Background(), time.Minute)
	defer cancelEarly()
	late, cancelLate := context.WithTimeout(context.Background(), time.Hour)
	defer cancelLate()
	ctx, cancel := batchContext([]*call{{ctx: early}, {ctx: late}})
	defer cancel()
	cancelEarly()
	cancelOwn()
	if ctx.Err() != nil {
		t.Fatal("a caller's cancellation cancelled the shared statement")
	}
	if d, ok := ctx.Deadline(); !ok {
		t.Fatal("no deadline")
	} else if want, _ := late.Deadline(); !d.Equal(want) {
		t.Fatalf("deadline %v, want the latest %v", d, want)
	}
	ctx, cancel = batchContext([]*call{{ctx: late}, {ctx: own}})
	defer cancel()
	if _, ok := ctx.Deadline(); ok || ctx.Err() != nil {
		t.Fatal("a statement with a caller without deadline has one, or is cancelled")
	}
}

// TestCombinerLimit: below its limit a combiner sends a call's statement
// at once, beside the one in flight; the limit is half the pool.
func TestCombinerLimit(t *testing.T) {
	g := newGatedSend()
	c := &combiner{send: g.send, limit: 2}
	first := make(chan error, 1)
	go func() { _, err := c.do(context.Background(), key(1)); first <- err }()
	<-g.entered
	if found, err := c.do(context.Background(), key(3)); err != nil || !found {
		t.Fatalf("second call beside the first: %v, %v", found, err)
	}
	close(g.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := len(g.recorded()); got != 2 {
		t.Fatalf("%d statements, want 2", got)
	}
	for conns, want := range map[int32]int{1: 1, 2: 1, 8: 4, 16: 8} {
		if got := inFlightLimit(conns); got != want {
			t.Errorf("inFlightLimit(%d) = %d, want %d", conns, got, want)
		}
	}
}

// TestCombinerReleasesEveryPromotion: a call promoted to send the next
// statement holds a place in flight and gives it back, also when another
// leader sent its key before it woke (its done and promote both closed);
// otherwise the places run out and later calls wait for ever.
func TestCombinerReleasesEveryPromotion(t *testing.T) {
	c := &combiner{limit: 1, send: func(context.Context, []pgtype.UUID) (map[[16]byte]bool, error) {
		return nil, nil
	}}
	for round := range 64 {
		cl := &call{key: key(1), promote: make(chan struct{}), done: make(chan struct{})}
		c.mu.Lock()
		cl.promoted = true // promoted: its place in flight is counted
		c.inFlight = 1
		close(cl.promote)
		close(cl.done) // and sent by another leader already
		c.mu.Unlock()
		if _, err := c.await(context.Background(), cl); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		inFlight := c.inFlight
		c.mu.Unlock()
		if inFlight != 0 {
			t.Fatalf("round %d: %d statements in flight after the promoted call returned, want 0", round, inFlight)
		}
	}
}
