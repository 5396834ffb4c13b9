package middleware

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/internal/logattr"
	"github.com/koto-dev/watermill-koto/internal/retry"
)

// run is one batch being run: every member gets a fate, handed out when
// the run ends, so that a failed message is retried, and a requeued one
// placed again, only once the messages before it in its key committed.
type run struct {
	b       *batcher
	ctx     context.Context // the batch's: its span, and the chain's life
	fates   map[*member]fate
	blocked map[lane]int64 // the offset of the first member of each lane that failed
	copies  map[*member][]*member
	calls   int // handler calls
	outages int // attempts failed by an outage, in a row
}

// run runs bt until each member has a fate, and hands them out.
func (b *batcher) run(bt *batch) {
	start := time.Now()
	members := slices.Clone(bt.members)
	slices.SortStableFunc(members, compareMembers)
	r := &run{b: b, fates: make(map[*member]fate, len(members)), blocked: map[lane]int64{}}
	primaries := r.dedupe(members)
	ctx, end := b.cfg.tel.StartBatch(b.cfg.life, handlerName(members), string(bt.reason), messagesOf(members))
	r.ctx = ctx
	r.settle(primaries)
	r.settleCopies()
	end(r.batchError())
	r.log(bt, len(members), time.Since(start))
	for _, m := range members {
		m.done <- r.fates[m]
	}
}

// dedupe returns the first member of each stored key, and notes the
// others as its copies: they share its fate, as duplicates.
func (r *run) dedupe(members []*member) []*member {
	if r.b.cfg.store == nil {
		return members
	}
	first := make(map[string]*member, len(members))
	primaries := members[:0:0]
	for _, m := range members {
		if p, ok := first[m.key.stored]; ok {
			if r.copies == nil {
				r.copies = map[*member][]*member{}
			}
			r.copies[p] = append(r.copies[p], m)
			continue
		}
		first[m.key.stored] = m
		primaries = append(primaries, m)
	}
	return primaries
}

// settle runs set, in order, until each member has a fate: the whole set
// when the handler succeeds; without the messages it names, and the later
// messages of their keys, when it names some; in halves when it fails
// without naming any, down to the one message that fails; again after a
// wait when an outage failed it.
func (r *run) settle(set []*member) {
	for set = r.ready(set); len(set) > 0; set = r.ready(set) {
		out := r.b.mode().attempt(r, set)
		var named MessageErrors
		switch {
		case out.err == nil:
			r.succeed(set, out.dups)
			return
		case errors.Is(out.err, errGone):
			continue
		case r.b.cfg.classify(out.err) == koto.ClassOutage:
			if !r.waitOut(set, out.err) {
				r.failAll(set, out.err)
				return
			}
			continue
		case errors.As(out.err, &named) && r.failNamed(set, named):
			if !r.b.mode().rollsBack() {
				r.succeed(r.ready(set), out.dups)
				return
			}
			continue
		case len(set) == 1:
			r.fail(set[0], out.err)
			return
		}
		half := len(set) / 2
		r.settle(set[:half])
		set = set[half:]
	}
}

// ready drops the members whose delivery gave up, and requeues those that
// follow a failed member of their lane.
func (r *run) ready(set []*member) []*member {
	out := set[:0:0]
	for _, m := range set {
		if _, settled := r.fates[m]; settled {
			continue
		}
		switch {
		case m.gone.Load():
			r.fates[m] = fate{kind: fateFailed, err: koto.Outage(m.ctx.Err())}
		case r.behindFailure(m):
			r.fates[m] = fate{kind: fateRequeued}
		default:
			out = append(out, m)
		}
	}
	return out
}

// succeed gives the members of set their fate once their effects are
// committed: duplicates, and handled messages (in check-handle-mark once
// they are marked).
func (r *run) succeed(set []*member, dups map[*member]bool) {
	var handled []*member
	for _, m := range set {
		if dups[m] {
			r.fates[m] = fate{kind: fateDuplicate}
		} else {
			handled = append(handled, m)
		}
	}
	if err := r.b.mode().commit(r, handled); err != nil {
		r.failAll(handled, err)
		return
	}
	for _, m := range handled {
		r.fates[m] = fate{kind: fateOK}
	}
}

// failNamed fails the members that named names; it reports false when it
// names none of set.
func (r *run) failNamed(set []*member, named MessageErrors) bool {
	failed := false
	for _, m := range set {
		if err, ok := named[m.msg]; ok && err != nil {
			r.fail(m, err)
			failed = true
		}
	}
	return failed
}

// fail gives m its error, and blocks the rest of its lane for the rest
// of the run: the messages after it wait for it. A member behind a failed
// one is requeued instead: that one goes first.
func (r *run) fail(m *member, err error) {
	if r.behindFailure(m) {
		r.fates[m] = fate{kind: fateRequeued}
		return
	}
	r.fates[m] = fate{kind: fateFailed, err: err}
	r.blocked[m.lane()] = m.pos.Offset
}

// behindFailure reports whether a member of m's lane before m failed in
// the run. The messages before a failed one are not held: they commit
// before it is retried or dead-lettered, as their order wants.
func (r *run) behindFailure(m *member) bool {
	off, ok := r.blocked[m.lane()]
	return ok && m.pos.Offset > off
}

func (r *run) failAll(set []*member, err error) {
	for _, m := range set {
		r.fates[m] = fate{kind: fateFailed, err: err}
	}
}

// waitOut waits before an attempt of set again after an outage, and
// reports false when the chain closed or every member's delivery ended
// meanwhile: no one is left to wait for.
func (r *run) waitOut(set []*member, err error) bool {
	r.outages++
	r.b.cfg.logger.LogAttrs(r.ctx, slog.LevelWarn, "batch failed, retrying",
		slog.String(logattr.Error, err.Error()), slog.Int(logattr.Attempts, r.outages))
	ctx, stop := untilAllEnd(r.b.cfg.life, set)
	defer stop()
	return retry.Sleep(ctx, r.b.cfg.batch.Backoff.Delay(r.outages-1)) == nil
}

// untilAllEnd returns a context of parent that also ends once the context
// of every member of set has ended.
func untilAllEnd(parent context.Context, set []*member) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	left := atomic.Int64{}
	left.Store(int64(len(set)))
	stops := make([]func() bool, len(set))
	for i, m := range set {
		stops[i] = context.AfterFunc(m.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// settleCopies gives each copy its primary's fate: a copy of a handled
// message is a duplicate.
func (r *run) settleCopies() {
	for p, copies := range r.copies {
		f := r.fates[p]
		if f.kind == fateOK {
			f.kind = fateDuplicate
		}
		for _, c := range copies {
			r.fates[c] = f
		}
	}
}

// call runs the handler on msgs, turning a panic into a poison
// [PanicError].
func (r *run) call(ctx context.Context, msgs []*message.Message) (err error) {
	r.calls++
	defer func() {
		if v := recover(); v != nil {
			err = koto.Poison(&PanicError{Value: v, Stack: string(debug.Stack())})
		}
	}()
	return r.b.fn(ctx, msgs)
}

// errGone ends an attempt that would commit a message whose delivery gave
// up meanwhile: the attempt is rolled back and run again without it.
var errGone = errors.New("middleware: batch: a delivery of the batch ended")

// batchError is the error of the batch's span: the first failure.
func (r *run) batchError() error {
	for _, f := range r.fates {
		if f.kind == fateFailed {
			return f.err
		}
	}
	return nil
}

// log writes the batch's one line, at debug.
func (r *run) log(bt *batch, size int, took time.Duration) {
	logger := r.b.cfg.logger
	if !logger.Enabled(r.ctx, slog.LevelDebug) {
		return
	}
	var counts [4]int
	for _, f := range r.fates {
		counts[f.kind]++
	}
	logger.LogAttrs(r.ctx, slog.LevelDebug, "batch handled",
		slog.String(logattr.Handler, handlerName(bt.members)),
		slog.Int("batch_size", size),
		slog.String("batch_flush", string(bt.reason)),
		slog.Duration(logattr.Duration, took),
		slog.Int("handled", counts[fateOK]),
		slog.Int("duplicates", counts[fateDuplicate]),
		slog.Int("failed", counts[fateFailed]),
		slog.Int("requeued", counts[fateRequeued]),
		slog.Int("handler_calls", r.calls))
}

func messagesOf(members []*member) []*message.Message {
	msgs := make([]*message.Message, len(members))
	for i, m := range members {
		msgs[i] = m.msg
	}
	return msgs
}

// handlerName is the router handler of the batch.
func handlerName(members []*member) string {
	if len(members) == 0 {
		return ""
	}
	return message.HandlerNameFromCtx(members[0].ctx)
}
