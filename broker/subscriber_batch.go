package broker

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
)

// batcher fills the batches of a partition of a batch subscriber. A
// record is open, free to join the next batch, while no record of its key
// is in a batch in flight; otherwise it waits in its key's lane, and the
// lane opens once the key's records in flight are all settled (a nacked
// one after Config.NackResendSleep, first in its lane).
type batcher struct {
	cfg   BatchConfig
	sleep time.Duration // Config.NackResendSleep

	open      []arrival // in the order they opened
	openBytes int
	openSince time.Time // when the oldest open record came in

	keys    map[string]*batchLane // of the keys with records in flight or waiting
	cooling map[string]*batchLane // of those, the lanes with nothing in flight, waiting for a nacked record's pause
}

// arrival is a record and when it came in: a batch began filling when its
// oldest record came in, so that records that waited for their key's
// batch in flight do not wait again.
type arrival struct {
	rec *sarama.ConsumerMessage
	at  time.Time
}

// batchLane is a key with records in batches in flight, or a nacked
// record waiting to be handed out again.
type batchLane struct {
	inFlight  int
	waiting   []arrival // in offset order
	notBefore time.Time // of the nacked record first in waiting
}

func newBatcher(cfg Config) *batcher {
	return &batcher{cfg: cfg.Batch, sleep: max(cfg.NackResendSleep, 0), keys: map[string]*batchLane{}, cooling: map[string]*batchLane{}}
}

func byOffset(x, y arrival) int { return cmp.Compare(x.rec.Offset, y.rec.Offset) }

// add takes in a record that came in at.
func (b *batcher) add(rec *sarama.ConsumerMessage, at time.Time) { b.place(arrival{rec, at}) }

// place puts r behind its key's lane, or opens it.
func (b *batcher) place(r arrival) {
	if l := b.keys[string(r.rec.Key)]; l != nil {
		l.waiting = append(l.waiting, r)
		return
	}
	b.opened(r)
}

func (b *batcher) opened(rs ...arrival) {
	for _, r := range rs {
		if len(b.open) == 0 || r.at.Before(b.openSince) {
			b.openSince = r.at
		}
		b.open = append(b.open, r)
		b.openBytes += recordSize(r.rec)
	}
}

// ready reports whether the open records make a batch to hand out now.
func (b *batcher) ready(now time.Time) bool {
	return len(b.open) > 0 && (len(b.open) >= b.cfg.MaxMessages || b.openBytes >= b.cfg.MaxBytes || !now.Before(b.openSince.Add(b.cfg.MaxWait)))
}

// take cuts the next batch from the open records, the oldest offsets
// first, and why it was cut; the open records of its keys left out wait
// for it.
func (b *batcher) take() ([]*sarama.ConsumerMessage, string) {
	slices.SortFunc(b.open, byOffset)
	n, size, reason := 0, 0, "time"
	for ; n < len(b.open) && n < b.cfg.MaxMessages; n++ {
		s := recordSize(b.open[n].rec)
		if n > 0 && size+s > b.cfg.MaxBytes {
			break
		}
		size += s
	}
	switch {
	case n == b.cfg.MaxMessages:
		reason = "count"
	case size >= b.cfg.MaxBytes || n < len(b.open):
		reason = "bytes"
	}
	batch := make([]*sarama.ConsumerMessage, n)
	for i, r := range b.open[:n] {
		batch[i] = r.rec
		b.lane(r.rec).inFlight++
	}
	rest := b.open[n:]
	b.open, b.openBytes = nil, 0
	for _, r := range rest {
		b.place(r)
	}
	return batch, reason
}

func (b *batcher) lane(rec *sarama.ConsumerMessage) *batchLane {
	l := b.keys[string(rec.Key)]
	if l == nil {
		l = &batchLane{}
		b.keys[string(rec.Key)] = l
	}
	return l
}

// settle takes the fate of a record of a batch: a nacked one goes back to
// the front of its key, which opens once nothing of it is in flight.
func (b *batcher) settle(rec *sarama.ConsumerMessage, acked bool, now time.Time) {
	k := string(rec.Key)
	l := b.keys[k]
	l.inFlight--
	if !acked {
		r := arrival{rec, now}
		i, _ := slices.BinarySearchFunc(l.waiting, r, byOffset)
		l.waiting = slices.Insert(l.waiting, i, r)
		l.notBefore = now.Add(b.sleep)
	}
	if l.inFlight > 0 {
		return
	}
	if now.Before(l.notBefore) {
		b.cooling[k] = l
		return
	}
	delete(b.keys, k)
	b.opened(l.waiting...)
}

// wake opens the lanes whose nacked record's pause is over.
func (b *batcher) wake(now time.Time) {
	for k, l := range b.cooling {
		if !now.Before(l.notBefore) {
			delete(b.cooling, k)
			delete(b.keys, k)
			b.opened(l.waiting...)
		}
	}
}

// due is when ready or wake may change their answer without a record
// coming in or settling, or zero.
func (b *batcher) due(now time.Time) time.Time {
	var at time.Time
	if len(b.open) > 0 && !b.ready(now) {
		at = b.openSince.Add(b.cfg.MaxWait)
	}
	for _, l := range b.cooling {
		if at.IsZero() || l.notBefore.Before(at) {
			at = l.notBefore
		}
	}
	return at
}

// clear drops what is not in flight, when the partition stops.
func (b *batcher) clear() {
	b.open, b.openBytes = nil, 0
	for _, l := range b.keys {
		l.waiting = nil
	}
	clear(b.cooling)
}

// batchSlot returns the channel to take a slot of the subscriber on when
// a batch is ready to go, or nil.
func (p *partition) batchSlot() chan<- struct{} {
	if p.batches == nil || !p.batches.ready(time.Now()) {
		return nil
	}
	return p.sub.batchSlots
}

// launchBatch hands the next batch to a delivery, which holds the slot
// taken for it until the batch is acked or nacked.
func (p *partition) launchBatch() {
	recs, reason := p.batches.take()
	p.inFlight += len(recs)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() { <-p.sub.batchSlots }()
		p.deliverBatch(recs, reason)
	}()
}

// batchTick arms the partition's timer for the batcher's next due time.
func (p *partition) batchTick() {
	if p.batches == nil {
		return
	}
	at := p.batches.due(time.Now())
	if at.Equal(p.batchAt) {
		return
	}
	p.batchAt = at
	if at.IsZero() {
		p.batchTimer.Stop()
		p.batchDue = nil
		return
	}
	p.batchTimer.Reset(time.Until(at))
	p.batchDue = p.batchTimer.C
}

// deliverBatch hands out the batch of recs as one message and reports how
// each of them was settled; those left unsettled when the batch message
// is acked or nacked, or when the partition stops, count as nacked.
func (p *partition) deliverBatch(recs []*sarama.ConsumerMessage, reason string) {
	ctx, done := context.WithCancel(p.ctx)
	defer done()
	msgs := make([]*message.Message, 0, len(recs))
	for _, rec := range recs {
		msg, ok := p.decode(rec)
		if !ok {
			break
		}
		msg.SetContext(p.messageContext(ctx, rec))
		msgs = append(msgs, msg)
	}
	batch := koto.NewBatch(msgs, func(i int, acked bool) { p.report(delivered{rec: recs[i], acked: acked}) })
	batch.Reason = reason
	if len(msgs) == len(recs) {
		env := message.NewMessage(watermill.NewUUID(), nil)
		env.SetContext(koto.ContextWithBatch(ctx, batch))
		p.offer(env)
	}
	for i, m := range msgs {
		select {
		case <-m.Acked(): // acked on the message rather than through the batch
			batch.Ack(i)
		default:
			batch.Nack(i)
		}
	}
	for _, rec := range recs[len(msgs):] {
		p.report(delivered{rec: rec})
	}
}

// report tells the partition how a record it handed out was settled.
func (p *partition) report(d delivered) {
	select {
	case p.results <- d:
	case <-p.gone:
	}
}
