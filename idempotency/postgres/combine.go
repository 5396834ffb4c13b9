package postgres

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// inFlightShare is the share of the pool's connections that statements of
// one kind (checks, or marks) may hold at once: half each. Below it a call
// sends at once, as without combining, since waiting for a statement in
// flight costs more than a round trip of one's own on an idle server;
// beyond it, where calls would queue for a connection anyway, they wait
// and go together in one statement.
const inFlightShare = 2

// inFlightLimit is the limit of a combiner on a pool of maxConns.
func inFlightLimit(maxConns int32) int { return max(1, int(maxConns)/inFlightShare) }

// combiner groups concurrent calls of one kind into one statement: the
// combining of the package doc. The caller that finds fewer than
// limit statements in flight sends its key with those of every call
// waiting; when its statement ends, it hands that role to the first call
// that arrived meanwhile. No goroutine of its own runs.
type combiner struct {
	// send runs the statement for keys, distinct and in ascending order,
	// and returns the keys it found (checks) or nil (marks).
	send func(ctx context.Context, keys []pgtype.UUID) (map[[16]byte]bool, error)
	// limit is how many statements may be in flight at once, at least 1.
	limit int

	mu       sync.Mutex
	inFlight int     // statements sent, or calls promoted to send one
	waiting  []*call // calls not yet in a statement
}

// call is one caller's key on its way through a combiner.
type call struct {
	ctx      context.Context
	key      [16]byte
	promote  chan struct{} // closed when the call is to send the next statement
	promoted bool          // under the combiner's mu
	done     chan struct{} // closed when found and err are set
	found    bool
	err      error
}

// do runs key through the combiner and returns whether the statement found
// it, or the statement's error, or ctx's once the caller stops waiting.
func (c *combiner) do(ctx context.Context, key [16]byte) (bool, error) {
	cl := &call{ctx: ctx, key: key, promote: make(chan struct{}), done: make(chan struct{})}
	c.mu.Lock()
	c.waiting = append(c.waiting, cl)
	if c.inFlight < c.limit {
		c.inFlight++
		c.mu.Unlock()
		c.lead()
		<-cl.done // in this statement, or in one sent meanwhile
		return cl.found, cl.err
	}
	c.mu.Unlock()
	return c.await(ctx, cl)
}

// await waits for the statement of cl, a call queued behind the limit. A
// promoted call holds a place in flight and sends the next statement,
// also when a leader sent its key before it woke: the select may then
// take done rather than promote, so it reads promoted, which no longer
// changes once cl has left the queue.
func (c *combiner) await(ctx context.Context, cl *call) (bool, error) {
	select {
	case <-cl.done:
	case <-cl.promote:
	case <-ctx.Done():
		if c.abandon(cl) {
			return false, ctx.Err()
		}
	}
	c.mu.Lock()
	promoted := cl.promoted
	c.mu.Unlock()
	if promoted {
		c.lead()
	}
	<-cl.done // in a statement that ends within its deadlines
	return cl.found, cl.err
}

// abandon takes cl out of the queue, unless it was promoted or sent
// already.
func (c *combiner) abandon(cl *call) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.waiting, cl)
	if i < 0 || cl.promoted {
		return false
	}
	c.waiting = slices.Delete(c.waiting, i, i+1)
	return true
}

// lead sends every waiting call's key in one statement, then promotes the
// first call that arrived meanwhile, if any.
func (c *combiner) lead() {
	c.mu.Lock()
	batch := c.waiting
	c.waiting = nil
	c.mu.Unlock()
	if len(batch) > 0 {
		c.flush(batch)
	}
	c.mu.Lock()
	c.inFlight--
	if len(c.waiting) > 0 && !c.waiting[0].promoted && c.inFlight < c.limit {
		w := c.waiting[0]
		w.promoted = true
		c.inFlight++
		close(w.promote)
	}
	c.mu.Unlock()
}

// flush sends batch's keys and settles its calls.
func (c *combiner) flush(batch []*call) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	keys := make([]pgtype.UUID, 0, len(batch))
	for _, cl := range batch {
		keys = append(keys, pgtype.UUID{Bytes: cl.key, Valid: true})
	}
	slices.SortFunc(keys, func(a, b pgtype.UUID) int { return bytes.Compare(a.Bytes[:], b.Bytes[:]) })
	keys = slices.CompactFunc(keys, func(a, b pgtype.UUID) bool { return a.Bytes == b.Bytes })
	found, err := c.send(ctx, keys)
	for _, cl := range batch {
		cl.found, cl.err = found[cl.key], err
		close(cl.done)
	}
}

// batchContext is the context of a statement for batch: a call alone
// sends with its own context; several send with the first one's values,
// no cancellation (one caller giving up does not fail the others), and
// the latest deadline of the calls, or none if one has none.
func batchContext(batch []*call) (context.Context, context.CancelFunc) {
	if len(batch) == 1 {
		return batch[0].ctx, func() {}
	}
	var latest time.Time
	for _, cl := range batch {
		d, ok := cl.ctx.Deadline()
		if !ok {
			return context.WithoutCancel(batch[0].ctx), func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(batch[0].ctx), latest)
}
