package middleware

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/internal/logattr"
	"github.com/koto-dev/watermill-koto/internal/retry"
)

// batchMode is how a batch claims its messages: in the transaction of its
// effects, by check and mark around the handler, or not at all.
type batchMode interface {
	// attempt runs the handler once on set, less its duplicates.
	attempt(r *run, set []*member) attempted
	// commit makes the handled members' outcome final.
	commit(r *run, handled []*member) error
	// rollsBack reports whether a failed attempt leaves no effects, so
	// that the rest of the batch runs again without the failed messages.
	rollsBack() bool
}

// attempted is the outcome of one attempt.
type attempted struct {
	err  error
	dups map[*member]bool
}

func (b *batcher) mode() batchMode {
	switch s := b.cfg.store; {
	case s == nil:
		return plainBatch{}
	case b.cfg.idem.Transactional:
		return txBatch{store: s.(idempotency.TxBatchStore)}
	default:
		return checkMarkBatch{store: s}
	}
}

// txBatch claims a batch in the transaction of its effects.
type txBatch struct{ store idempotency.TxBatchStore }

func (txBatch) rollsBack() bool              { return true }
func (txBatch) commit(*run, []*member) error { return nil }

func (t txBatch) attempt(r *run, set []*member) attempted {
	claim := idempotency.BatchClaim{Keys: make([]string, len(set)), Timeout: r.b.cfg.idem.StoreTimeout}
	for i, m := range set {
		claim.Keys[i] = m.key.stored
		claim.LockKeys = append(claim.LockKeys, m.locks...)
	}
	dups := make(map[*member]bool)
	called := false
	defer restoreContexts(set)
	err := t.store.TransactBatch(r.ctx, claim, func(claimed []bool, bind func(context.Context) context.Context) error {
		called = true
		msgs := make([]*message.Message, 0, len(set))
		for i, m := range set {
			if !claimed[i] {
				dups[m] = true
				continue
			}
			m.msg.SetContext(bind(m.ctx))
			msgs = append(msgs, m.msg)
		}
		if err := r.call(bind(r.ctx), msgs); err != nil {
			return err
		}
		for _, m := range set {
			if m.gone.Load() {
				return errGone
			}
		}
		return nil
	})
	if err == nil && !called {
		for _, m := range set {
			dups[m] = true
		}
	}
	return attempted{err: err, dups: dups}
}

func restoreContexts(set []*member) {
	for _, m := range set {
		m.msg.SetContext(m.ctx)
	}
}

// checkMarkBatch checks a batch's keys with one call, runs the handler
// and marks the keys of the handled messages with one call.
type checkMarkBatch struct{ store idempotency.Store }

func (checkMarkBatch) rollsBack() bool { return false }

func (c checkMarkBatch) attempt(r *run, set []*member) attempted {
	keys := storedKeys(set)
	ctx, cancel := context.WithTimeout(r.ctx, r.b.cfg.idem.StoreTimeout)
	processed, err := c.processed(ctx, keys)
	cancel()
	if err != nil {
		err = fmt.Errorf("middleware: batch idempotency check: %w", err)
		if !r.b.cfg.idem.IgnoreStoreErrors {
			return attempted{err: koto.Outage(err)}
		}
		r.b.cfg.logger.LogAttrs(r.ctx, slog.LevelWarn, "batch idempotency check failed; handling every message", slog.String(logattr.Error, err.Error()))
	}
	dups := make(map[*member]bool)
	msgs := make([]*message.Message, 0, len(set))
	for _, m := range set {
		if processed[m.key.stored] {
			dups[m] = true
		} else {
			msgs = append(msgs, m.msg)
		}
	}
	if len(msgs) > 0 {
		err = r.call(r.ctx, msgs)
	}
	return attempted{err: err, dups: dups}
}

// commit marks the handled members, retried with MarkBackoff until the
// marks succeed or the chain closes, so that an outage does not run the
// handler twice; with IgnoreStoreErrors a failed mark is dropped.
func (c checkMarkBatch) commit(r *run, handled []*member) error {
	if len(handled) == 0 {
		return nil
	}
	keys := storedKeys(handled)
	cfg := r.b.cfg.idem
	markOnce := func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), cfg.StoreTimeout)
		defer cancel()
		if err := c.mark(ctx, keys); err != nil {
			r.b.cfg.logger.LogAttrs(r.ctx, slog.LevelWarn, "batch idempotency mark failed", slog.String(logattr.Error, err.Error()))
			return fmt.Errorf("middleware: batch idempotency mark: %w", err)
		}
		return nil
	}
	if cfg.IgnoreStoreErrors {
		_ = markOnce()
		return nil
	}
	return retry.Do(r.b.cfg.life, cfg.MarkBackoff.Delay, markOnce, func(retry.Failure) error { return nil }, koto.Outage)
}

func (c checkMarkBatch) processed(ctx context.Context, keys []string) (map[string]bool, error) {
	if bs, ok := c.store.(idempotency.BatchStore); ok {
		return bs.ProcessedKeys(ctx, keys)
	}
	out := make(map[string]bool)
	for _, k := range keys {
		done, err := c.store.IsProcessed(ctx, k)
		if err != nil {
			return nil, err
		}
		out[k] = done
	}
	return out, nil
}

func (c checkMarkBatch) mark(ctx context.Context, keys []string) error {
	if bs, ok := c.store.(idempotency.BatchStore); ok {
		return bs.MarkProcessedKeys(ctx, keys)
	}
	for _, k := range keys {
		if err := c.store.MarkProcessed(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// plainBatch runs the handler without idempotency.
type plainBatch struct{}

func (plainBatch) rollsBack() bool              { return false }
func (plainBatch) commit(*run, []*member) error { return nil }

func (plainBatch) attempt(r *run, set []*member) attempted {
	return attempted{err: r.call(r.ctx, messagesOf(set))}
}

func storedKeys(set []*member) []string {
	keys := make([]string, len(set))
	for i, m := range set {
		keys[i] = m.key.stored
	}
	return keys
}
