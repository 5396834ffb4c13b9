package middleware

import (
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
)

// batcher gathers the deliveries of one router handler into batches. Each
// delivery's goroutine waits in it for its batch; the first of a batch
// leads it: it waits for the batch to fill or its time to pass, runs it,
// and hands every member its fate. No goroutine of its own runs.
type batcher struct {
	cfg batchSettings
	fn  BatchHandlerFunc

	turns chan struct{} // one per batch running: Parallel at most

	mu      sync.Mutex
	open    *batch             // filling; nil when none is
	waiting map[link][]*member // members waiting for their predecessor, by its link
}

// batch is a set of members run together.
type batch struct {
	members []*member
	bytes   int
	at      map[link]bool // the links of its members
	first   time.Time     // when its first member arrived
	reason  flushReason   // set when sealed
	full    chan struct{} // closed when sealed for its count or bytes
}

// flushReason says why a batch stopped filling.
type flushReason string

const (
	flushCount flushReason = "count"
	flushBytes flushReason = "bytes"
	flushTime  flushReason = "time"
	flushAlone flushReason = "retry" // a message retried after a failure runs alone
)

func newBatcher(cfg batchSettings, h BatchHandlerFunc) *batcher {
	return &batcher{cfg: cfg, fn: h, turns: make(chan struct{}, cfg.batch.Parallel), waiting: map[link][]*member{}}
}

// handle is the router handler function: it places msg in a batch, waits
// for its fate and returns it.
func (b *batcher) handle(msg *message.Message) error {
	if b.cfg.closed.Load() {
		return koto.Outage(fmt.Errorf("middleware: batch: %w", ErrClosed))
	}
	reportFrom(msg.Context()).batched()
	m, err := b.newMember(msg)
	if err != nil {
		return err
	}
	if isRetry(m.ctx) {
		// It failed in a batch: its retries run alone, so that a good
		// message never waits for it twice.
		b.runAlone(m)
		return b.result(m, <-m.done)
	}
	for {
		f, err := b.await(m)
		if err != nil {
			return err
		}
		if f.kind != fateRequeued {
			return b.result(m, f)
		}
		m = m.again()
	}
}

// await places m in a batch, leads the batch if m is its first member,
// and returns m's fate, or the error of m's context when it ends first.
func (b *batcher) await(m *member) (fate, error) {
	lead, err := b.place(m)
	if err != nil {
		return fate{}, err
	}
	if lead != nil {
		b.lead(lead)
		return <-m.done, nil
	}
	select {
	case f := <-m.done:
		return f, nil
	case <-m.ctx.Done():
		m.gone.Store(true)
		return fate{}, koto.Outage(fmt.Errorf("middleware: batch: waiting for the batch: %w", m.ctx.Err()))
	}
}

// place puts m in the open batch once its predecessor is acked or in that
// batch, and returns the batch when m is its first member, which leads
// it.
func (b *batcher) place(m *member) (lead *batch, err error) {
	b.mu.Lock()
	if m.after == nil || isDone(m.after.Done) || b.open != nil && b.open.at[m.afterLink()] {
		defer b.mu.Unlock()
		return b.join(m), nil
	}
	m.placed = make(chan struct{})
	after := m.afterLink()
	b.waiting[after] = append(b.waiting[after], m)
	b.mu.Unlock()
	select {
	case <-m.placed:
		return nil, nil // pulled in after its predecessor: never first
	case <-m.after.Done:
	case <-m.ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if m.batch != nil {
		return nil, nil
	}
	b.unwait(m, after)
	if err := m.ctx.Err(); err != nil {
		return nil, koto.Outage(fmt.Errorf("middleware: batch: waiting for the message before it in its key: %w", err))
	}
	return b.join(m), nil
}

// join adds m to the open batch, or to a new one that it then leads, and
// pulls in the members waiting for it. Under mu.
func (b *batcher) join(m *member) (lead *batch) {
	if b.open == nil {
		b.open = &batch{at: map[link]bool{}, first: time.Now(), full: make(chan struct{})}
		lead = b.open
	}
	bt := b.open
	for queue := []*member{m}; len(queue) > 0; queue = queue[1:] {
		m := queue[0]
		if b.open != bt { // bt filled up: m waits for its predecessor's ack again
			b.waiting[m.afterLink()] = append(b.waiting[m.afterLink()], m)
			continue
		}
		b.add(bt, m)
		if l, ok := m.at(); ok {
			queue = append(queue, b.waiting[l]...)
			delete(b.waiting, l)
		}
	}
	return lead
}

// add puts m in bt, and seals bt when it is full. Under mu.
func (b *batcher) add(bt *batch, m *member) {
	bt.members = append(bt.members, m)
	bt.bytes += m.size
	m.batch = bt
	if l, ok := m.at(); ok {
		bt.at[l] = true
	}
	if m.placed != nil {
		close(m.placed)
	}
	switch {
	case len(bt.members) >= b.cfg.batch.MaxMessages:
		b.seal(bt, flushCount)
	case bt.bytes >= b.cfg.batch.MaxBytes:
		b.seal(bt, flushBytes)
	}
}

// seal stops bt filling. Under mu.
func (b *batcher) seal(bt *batch, reason flushReason) {
	if bt.reason != "" {
		return
	}
	bt.reason = reason
	if b.open == bt {
		b.open = nil
	}
	if reason != flushTime {
		close(bt.full)
	}
}

// unwait takes m off the list of the members waiting for after. Under mu.
func (b *batcher) unwait(m *member, after link) {
	list := b.waiting[after]
	for i, w := range list {
		if w == m {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(b.waiting, after)
	} else {
		b.waiting[after] = list
	}
}

// lead waits for bt to fill, or MaxWait from its first member, then for
// one of the Parallel turns to run, and runs it. A batch whose time has
// come but has to wait for its turn goes on filling meanwhile.
func (b *batcher) lead(bt *batch) {
	t := time.NewTimer(b.cfg.batch.MaxWait - time.Since(bt.first))
	select {
	case <-bt.full:
		t.Stop()
		b.turns <- struct{}{}
	case <-t.C:
		select {
		case b.turns <- struct{}{}:
			b.mu.Lock()
			b.seal(bt, flushTime)
			b.mu.Unlock()
		case <-bt.full:
			b.turns <- struct{}{}
		}
	}
	defer func() { <-b.turns }()
	b.run(bt)
}

// runAlone runs a batch of m alone, in its turn, once the message before
// it in its key is acked: the one place where that could still be running
// is the batch m failed in. It waits before it takes a turn, which that
// batch may be waiting for.
func (b *batcher) runAlone(m *member) {
	if m.after != nil {
		select {
		case <-m.after.Done:
		case <-m.ctx.Done():
		}
	}
	b.turns <- struct{}{}
	defer func() { <-b.turns }()
	b.run(&batch{members: []*member{m}, first: time.Now(), reason: flushAlone})
}

// result is what the member's delivery returns for f; a duplicate is
// reported as [Idempotency] reports one.
func (b *batcher) result(m *member, f fate) error {
	switch f.kind {
	case fateFailed:
		return f.err
	case fateDuplicate:
		b.cfg.idem.skipped(m.msg, m.key)
	}
	return nil
}
