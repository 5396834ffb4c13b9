package middleware

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/internal/logattr"
	"github.com/koto-dev/watermill-koto/internal/retry"
)

// batcher runs one router handler's batches: each batch on the goroutine
// the router gives its message, with no goroutine of its own.
type batcher struct {
	cfg batchSettings
	fn  BatchHandlerFunc
}

func newBatcher(cfg batchSettings, h BatchHandlerFunc) *batcher {
	return &batcher{cfg: cfg, fn: h}
}

// handle is the router handler function: it runs the batch that env
// carries, settling each of its messages, and returns nil. A message from
// another subscriber is a batch of its own, nacked by the error returned.
func (b *batcher) handle(env *message.Message) error {
	if b.cfg.closed.Load() {
		return koto.Outage(fmt.Errorf("middleware: batch: %w", ErrClosed))
	}
	batch, ok := koto.BatchFromContext(env.Context())
	if !ok {
		return b.single(env)
	}
	b.process(env.Context(), batch)
	return nil
}

// single runs msg, which came from a subscriber of single messages, as a
// batch of one.
func (b *batcher) single(msg *message.Message) error {
	var acked bool
	batch := koto.NewBatch([]*message.Message{msg}, func(_ int, ok bool) { acked = ok })
	batch.Reason = "single"
	b.process(msg.Context(), batch)
	if !acked {
		return koto.Outage(fmt.Errorf("middleware: batch: message %s not handled: %w", msg.UUID, context.Canceled))
	}
	return nil
}

// process settles every message of batch: those its checks settle first,
// then the others in runs, a failed one retried alone or dead-lettered,
// and the messages behind it in its key after it.
func (b *batcher) process(router context.Context, batch *koto.Batch) {
	p := processing{b: b, batch: batch, reason: batch.Reason}
	todo := p.prepare(router)
	for {
		if len(todo) > 0 {
			p.apply(todo, b.run(todo, p.reason))
		}
		todo = p.release()
		if len(todo) > 0 {
			p.reason = "retry"
			continue
		}
		m := p.nextRetry()
		if m == nil {
			return
		}
		if !p.waitFor(m) {
			p.nackLane(m)
			continue
		}
		p.apply([]*member{m}, b.run([]*member{m}, "retry"))
	}
}

// processing is the state of one batch being processed.
type processing struct {
	b        *batcher
	batch    *koto.Batch
	reason   string
	retrying []*member // failed, waiting for their next attempt, alone
	held     []*member // behind a failed member of their key, in order
}

// prepare turns the batch's messages into members, settling at once those
// a check settles: a record its mapping could not read (poison), a probe
// of another client, one that BatchConfig.Prepare skips or fails, one
// without an idempotency key.
func (p *processing) prepare(router context.Context) []*member {
	var todo []*member
	for i, msg := range p.batch.Messages {
		msg.SetContext(withRouterValues(msg.Context(), router))
		m, err := p.b.newMember(i, msg)
		if err == nil {
			err = koto.InvalidRecord(msg)
			if err != nil {
				err = koto.Poison(err)
			}
		}
		switch {
		case err != nil:
			p.failed(m, err)
		case msg.Metadata.Get(koto.ProbeMetadataKey) != "":
			p.settle(m, outcomeProbe)
		case !p.gate(m):
		case p.b.cfg.batch.Prepare != nil:
			if skip, err := p.b.cfg.batch.Prepare(msg); err != nil {
				p.failed(m, err)
			} else if skip {
				p.settle(m, outcomeOK)
			} else {
				m.ctx = msg.Context() // with what Prepare put in it
				todo = append(todo, m)
			}
		default:
			todo = append(todo, m)
		}
	}
	return todo
}

// gate settles m when parking has it wait, or takes it elsewhere, and
// reports whether it runs: another group's parked message come back is a
// duplicate here; a message of a key with a parked message parks behind
// it; a parked message come back runs, or is dead-lettered when an
// operator asked for it.
func (p *processing) gate(m *member) bool {
	d := p.b.cfg.dead
	m.group = d.cfg.ConsumerGroup(m.msg)
	if owner := m.msg.Metadata.Get(ParkedGroupKey); owner != "" && owner != m.group {
		p.settle(m, outcomeDuplicate)
		return false
	}
	if d.park == nil || m.group == "" {
		return true
	}
	entry, g, err := d.park.before(m.ctx, m.msg, m.group)
	switch {
	case err != nil && koto.ClassOf(err) == koto.ClassPoison:
		p.deadLetter(m, err, koto.ClassPoison)
	case err != nil:
		p.b.logNack(m, err)
		p.nackLane(m)
	case g == gateParked:
		p.settle(m, outcomeParked)
	case entry != nil && entry.DeadLetter:
		m.entry = entry
		p.deadLetter(m, ErrDeadLetterRequested, koto.ClassPoison)
	default:
		m.entry = entry
		return true
	}
	return false
}

// apply acts on the fates of a run of set, in order.
func (p *processing) apply(set []*member, fates map[*member]fate) {
	for _, m := range set {
		switch f := fates[m]; f.kind {
		case fateOK:
			p.done(m, outcomeOK)
		case fateDuplicate:
			p.b.cfg.idem.skipped(m.msg, m.key)
			p.done(m, outcomeDuplicate)
		case fateFailed:
			p.failed(m, f.err)
		case fateRequeued:
			p.held = append(p.held, m)
		}
	}
}

// done settles a member whose effects committed, first ending its
// parking if it was a parked message come back, which lets its key's next
// parked message come back.
func (p *processing) done(m *member, o outcome) {
	if m.entry != nil {
		if err := p.b.cfg.dead.park.release(m.ctx, m.entry); err != nil {
			p.b.logNack(m, err)
			p.nackLane(m)
			return
		}
	}
	p.settle(m, o)
}

// failed decides what becomes of a member whose attempt failed with err,
// as DeadLetter would: dead-lettered (poison, or out of retries), parked
// (out of retries in place, where parking is on), or tried again alone
// after a backoff. A member whose delivery ended is nacked.
func (p *processing) failed(m *member, err error) {
	if m.gone() {
		p.nackLane(m)
		return
	}
	d := p.b.cfg.dead
	class := p.b.cfg.classify(err)
	delay := d.cfg.Backoff.Delay(m.tries.failures)
	m.tries.attempts++
	switch {
	case !d.giveUp(&m.tries, class, err, delay):
		m.retryAt, m.lastErr = time.Now().Add(delay), err
		p.retrying = append(p.retrying, m)
		p.b.logRetry(m, err, class, delay)
		p.b.cfg.tel.BatchRetried(m.ctx, m.msg, class.String())
	case class == koto.ClassRetryable && p.park(m, err):
	default:
		p.deadLetter(m, err, class)
	}
}

// park parks m, out of its retries in place, when parking is on and it
// has a parking left, and reports whether m is settled so.
func (p *processing) park(m *member, cause error) bool {
	d := p.b.cfg.dead
	if d.park == nil || m.group == "" {
		return false
	}
	delay, ok := d.park.next(m.entry, cause)
	if !ok {
		return false
	}
	switch err := d.park.park(m.ctx, m.msg, m.group, m.entry, m.tries.attempts, cause, delay); {
	case err == nil:
		p.settle(m, outcomeParked)
	case koto.ClassOf(err) == koto.ClassPoison:
		p.deadLetter(m, errors.Join(cause, err), koto.ClassPoison) // it cannot be parked: its dead letter says why
	default:
		p.b.logNack(m, err)
		p.nackLane(m)
	}
	return true
}

// deadLetter sends m to the dead-letter topic, with its parking history
// if it was parked, and acks it; when that fails, m and the messages
// behind it are nacked.
func (p *processing) deadLetter(m *member, err error, class koto.Class) {
	if _, sendErr := p.b.cfg.dead.deadLetterParked(m.msg, err, class, m.tries.attempts, m.entry); sendErr != nil {
		p.b.logNack(m, sendErr)
		p.nackLane(m)
		return
	}
	p.b.logDeadLettered(m, err, class)
	p.settle(m, outcomeDeadLettered)
}

// settle acks m, with its outcome in the telemetry.
func (p *processing) settle(m *member, o outcome) {
	p.batch.Ack(m.i)
	p.b.cfg.tel.BatchSettled(m.ctx, m.msg, string(o))
}

// nackLane nacks m and the members held behind it in its key: they are
// handed out again, in order.
func (p *processing) nackLane(m *member) {
	p.retrying = slices.DeleteFunc(p.retrying, func(r *member) bool { return r == m })
	p.batch.Nack(m.i)
	p.b.cfg.tel.BatchSettled(m.ctx, m.msg, string(outcomeNacked))
	l := m.lane()
	p.held = slices.DeleteFunc(p.held, func(h *member) bool {
		if h.lane() != l {
			return false
		}
		p.batch.Nack(h.i)
		p.b.cfg.tel.BatchSettled(h.ctx, h.msg, string(outcomeNacked))
		return true
	})
}

// release returns the held members whose key has no failed member left to
// retry: the message they waited for is settled. Those whose key it left
// parked park behind it.
func (p *processing) release() []*member {
	var free []*member
	p.held = slices.DeleteFunc(p.held, func(h *member) bool {
		waiting := slices.ContainsFunc(p.retrying, func(r *member) bool { return r.lane() == h.lane() })
		if !waiting {
			free = append(free, h)
		}
		return !waiting
	})
	if p.b.cfg.dead.park == nil {
		return free
	}
	return slices.DeleteFunc(free, func(h *member) bool { return !p.gate(h) })
}

// nextRetry takes the failed member due first off the retry list.
func (p *processing) nextRetry() *member {
	if len(p.retrying) == 0 {
		return nil
	}
	i := 0
	for j, m := range p.retrying {
		if m.retryAt.Before(p.retrying[i].retryAt) {
			i = j
		}
	}
	m := p.retrying[i]
	p.retrying = slices.Delete(p.retrying, i, i+1)
	return m
}

// waitFor waits until m is due, and reports false when its delivery ended
// or the chain closed first.
func (p *processing) waitFor(m *member) bool {
	ctx, cancel := context.WithCancel(m.ctx)
	defer cancel()
	stop := context.AfterFunc(p.b.cfg.life, cancel)
	defer stop()
	return retry.Sleep(ctx, time.Until(m.retryAt)) == nil
}

// withRouterValues gives a batch's message the values the router put in
// the batch's context (the handler's name, the subscribed topic), which
// only the router can set, below its own.
func withRouterValues(ctx, router context.Context) context.Context {
	if ctx == router {
		return ctx
	}
	return routerValues{Context: ctx, router: router}
}

type routerValues struct {
	context.Context
	router context.Context
}

func (c routerValues) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.router.Value(key)
}

// logRetry, logDeadLettered and logNack write a message's lines, as
// [Logging] writes them for a message handled alone.
func (b *batcher) logRetry(m *member, err error, class koto.Class, delay time.Duration) {
	logRetry(m.ctx, b.cfg.logger, messageAttrs(m.ctx, m.msg), retryNote{err: err, class: class, attempt: m.tries.attempts, delay: delay})
}

func (b *batcher) logDeadLettered(m *member, err error, class koto.Class) {
	b.logDone(m, outcomeDeadLettered, slog.LevelError, slog.String(logattr.Error, err.Error()),
		slog.String(logattr.ErrorClass, class.String()), slog.Int(logattr.Attempts, m.tries.attempts))
}

func (b *batcher) logNack(m *member, err error) {
	b.logDone(m, outcomeNacked, slog.LevelWarn, slog.String(logattr.Error, err.Error()))
}

func (b *batcher) logDone(m *member, o outcome, level slog.Level, attrs ...slog.Attr) {
	if !b.cfg.logger.Enabled(m.ctx, level) {
		return
	}
	all := append(messageAttrs(m.ctx, m.msg), slog.String(logattr.Outcome, string(o)))
	b.cfg.logger.LogAttrs(m.ctx, level, "message handled", append(all, attrs...)...)
}
