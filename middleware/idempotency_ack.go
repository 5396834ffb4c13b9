package middleware

import (
	"context"
	"fmt"
	"slices"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill/message"
)

// markOnAck marks key once the router acks msg, on a goroutine that Close
// waits for; after Close it refuses, as an outage. A nack, or no ack within
// MarkAfterAckTimeout, marks nothing. The wait does not end with msg's
// context, since an outer middleware (a timeout, say) may cancel it before
// the router publishes and acks. Until the goroutine is done, deliveries of
// key wait in awaitPending.
func (d *checkHandleMark) markOnAck(ctx context.Context, msg *message.Message, key string) error {
	done := make(chan struct{})
	d.mu.Lock()
	if d.closed.Load() {
		d.mu.Unlock()
		return koto.Outage(fmt.Errorf("middleware: idempotency mark after the ack: %w", ErrClosed))
	}
	d.pending[key] = append(d.pending[key], done)
	d.marks.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.marks.Done()
		defer d.settle(key, done)
		if !d.acked(msg) {
			return
		}
		// msg's context may end right after the ack (watermill-kafka cancels
		// it then), so the mark gets a context of its own, which Close ends
		// when it gives up waiting.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.MarkAfterAckTimeout)
		defer cancel()
		defer context.AfterFunc(d.life, cancel)()
		if err := d.mark(ctx, key); err != nil {
			reportFrom(ctx).late("idempotency mark after the ack failed; a later duplicate of the message would run the handler again", err)
		}
	}()
	return nil
}

// acked waits until msg is acked (true), or nacked, MarkAfterAckTimeout
// passes or Close gives up waiting (false).
func (d *checkHandleMark) acked(msg *message.Message) bool {
	t := time.NewTimer(d.cfg.MarkAfterAckTimeout)
	defer t.Stop()
	select {
	case <-msg.Acked():
		return true
	case <-msg.Nacked():
	case <-t.C:
	case <-d.life.Done():
	}
	return false
}

// settle ends the pending mark of key that done stands for.
func (d *checkHandleMark) settle(key string, done chan struct{}) {
	d.mu.Lock()
	d.pending[key] = slices.DeleteFunc(d.pending[key], func(c chan struct{}) bool { return c == done })
	if len(d.pending[key]) == 0 {
		delete(d.pending, key)
	}
	d.mu.Unlock()
	close(done)
}

// awaitPending waits while earlier deliveries of key wait for their ack to
// mark it, so that a duplicate right behind one is skipped. After
// StoreTimeout it returns errMarkPending as an outage, so the delivery is
// retried later instead of running the handler a second time.
func (d *checkHandleMark) awaitPending(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StoreTimeout)
	defer cancel()
	for {
		d.mu.Lock()
		var done chan struct{}
		if p := d.pending[key]; len(p) > 0 {
			done = p[0]
		}
		d.mu.Unlock()
		if done == nil {
			return nil
		}
		select {
		case <-done:
		case <-ctx.Done():
			return koto.Outage(fmt.Errorf("%w (key %s): %w", errMarkPending, key, ctx.Err()))
		}
	}
}

// Close refuses new deliveries and waits for the pending marks after an
// ack to land, as [Chain.Close] says; it waits for their goroutines to
// return.
func (d *checkHandleMark) Close(ctx context.Context) error {
	d.mu.Lock()
	d.closed.Store(true)
	d.mu.Unlock()
	done := make(chan struct{})
	go func() {
		d.marks.Wait()
		close(done)
	}()
	defer d.abort()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		d.abort()
		<-done
		return fmt.Errorf("middleware: idempotency close: pending marks given up: %w", ctx.Err())
	}
}
