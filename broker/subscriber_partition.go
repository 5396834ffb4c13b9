package broker

import (
	"context"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
)

// markInterval is how long an ack waits at most to be marked for the next
// commit (sarama commits marks every Consumer.Offsets.AutoCommit.Interval,
// and when a session ends).
const markInterval = 100 * time.Millisecond

// uncommittedFactor times Config.PartitionBufferRecords is how far above
// its low-water mark a partition reads. A message that stays unacked holds
// the mark while the other keys are read, handled and acked above it;
// without a bound, what the commit metadata lists (and, past what it can
// hold, what a restart delivers again) would grow without end.
const uncommittedFactor = 10

// pauser is the part of sarama's consumer group that stops and restarts
// the fetching of a partition.
type pauser interface {
	Pause(map[string][]int32)
	Resume(map[string][]int32)
}

// partition hands out the messages of one claimed partition: it holds the
// records fetched and not acked, decides which may be in flight, and marks
// the low-water mark. Its state belongs to the goroutine of run; deliveries
// talk to it through results.
type partition struct {
	sub    *subscription
	sess   sarama.ConsumerGroupSession
	claim  sarama.ConsumerGroupClaim
	pauser pauser
	logger watermill.LoggerAdapter

	ctx      context.Context // of the partition's messages; ends with gone
	cancel   context.CancelFunc
	stopCtx  context.Context // ends when nothing more is handed out
	stop     context.CancelFunc
	stopping <-chan struct{} // stopCtx.Done()
	gone     chan struct{}   // closed when acks are no longer taken
	results  chan delivered  // from the deliveries
	wg       sync.WaitGroup  // the deliveries

	lanes    lanes
	offsets  offsets
	maxAhead int64                     // offsets received from the low-water mark on, at most
	backlog  []*sarama.ConsumerMessage // read from the claim beyond maxAhead, in offset order
	ready    []*sarama.ConsumerMessage // free to go, waiting for a worker
	inFlight int                       // handed to a delivery, not reported back

	// In the concurrent mode: which slot ready[0] is to take, how many of
	// those in flight took a shared one, and, while no slot is free, when
	// to look again.
	ticket    ticket
	borrowed  int
	slotFreed <-chan struct{}

	// Of a batch subscriber: its batches, and when to look at them again.
	batches    *batcher
	batchTimer *time.Timer
	batchAt    time.Time
	batchDue   <-chan time.Time

	held, heldBytes int // records fetched and not acked, and their size
	paused          bool

	marked     int64 // the offset last marked, and its metadata
	markedMeta string
	markTimer  *time.Timer
	markDue    <-chan time.Time // markTimer's channel while a mark is due
}

// delivered is what a delivery reports: acked, or given up because the
// partition is stopping.
type delivered struct {
	rec   *sarama.ConsumerMessage
	acked bool
}

func newPartition(sub *subscription, sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim, p pauser, done []offsetRange) *partition {
	pt := &partition{
		sub: sub, sess: sess, claim: claim, pauser: p,
		logger:   sub.logger.With(watermill.LogFields{"kafka_partition": claim.Partition()}),
		gone:     make(chan struct{}),
		results:  make(chan delivered),
		lanes:    newLanes(sub.cfg.laneMode()),
		offsets:  newOffsets(done),
		maxAhead: int64(sub.cfg.PartitionBufferRecords) * uncommittedFactor,
		marked:   claim.InitialOffset(),
	}
	pt.ctx, pt.cancel = context.WithCancel(sub.msgBase)
	pt.stopCtx, pt.stop = context.WithCancel(pt.ctx)
	pt.stopping = pt.stopCtx.Done()
	pt.markTimer = time.NewTimer(markInterval)
	pt.markTimer.Stop()
	if sub.cfg.batching() {
		pt.batches = newBatcher(sub.cfg)
		pt.batchTimer = time.NewTimer(time.Hour)
		pt.batchTimer.Stop()
	}
	return pt
}

// run consumes until the partition is revoked or the session ends, then
// drains the deliveries and marks what was acked.
func (p *partition) run() {
	defer p.markTimer.Stop()
	if p.batchTimer != nil {
		defer p.batchTimer.Stop()
	}
	if s := p.sub.slots; s != nil {
		defer func() { s.leave(p.borrowed + p.ticket.shared()) }()
	}
	p.consume()
	p.stop()
	p.drain()
	p.mark()
	close(p.gone)
	p.cancel()
	p.wg.Wait()
}

func (p *partition) consume() {
	// The claim is read even while the partition is too far above its
	// mark: with a cooperative strategy, its closing is the only word of a
	// revoke.
	records := p.claim.Messages()
	for {
		work, next := p.nextWork()
		p.batchTick()
		select {
		case rec, ok := <-records:
			if !ok {
				return // revoked
			}
			p.take(rec)
		case work <- next:
			// The worker reports to results before it is done, and only
			// this goroutine reads results: the Add comes first.
			p.wg.Add(1)
			p.ready[0] = nil
			p.ready = p.ready[1:]
			p.inFlight++
			p.borrowed += p.ticket.shared()
			p.ticket = noTicket
		case p.batchSlot() <- struct{}{}:
			p.launchBatch()
		case <-p.batchDue:
			p.batchDue, p.batchAt = nil, time.Time{}
			p.batches.wake(time.Now())
		case <-p.slotFreed:
			p.slotFreed = nil
		case d := <-p.results:
			p.finish(d)
		case <-p.markDue:
			p.mark()
		case <-p.sess.Context().Done():
			return
		}
	}
}

// drain takes the reports of the deliveries until none is in flight or
// Config.DrainTimeout has passed.
func (p *partition) drain() {
	p.ready, p.backlog = nil, nil
	if p.batches != nil {
		p.batches.clear()
	}
	timeout := time.NewTimer(p.sub.cfg.DrainTimeout)
	defer timeout.Stop()
	for p.inFlight > 0 {
		select {
		case d := <-p.results:
			p.finish(d)
		case <-timeout.C:
			p.logger.Info("Messages still in flight after Config.DrainTimeout; the partition's next owner gets them again",
				watermill.LogFields{"in_flight": p.inFlight})
			return
		}
	}
}

// take receives rec, or keeps it back, fetching paused, while the
// partition has received maxAhead offsets or more above its low-water
// mark.
func (p *partition) take(rec *sarama.ConsumerMessage) {
	if len(p.backlog) == 0 && !p.tooFarAhead() {
		p.receive(rec)
		return
	}
	p.backlog = append(p.backlog, rec)
	p.throttle()
}

// catchUp receives the records kept back, as far as the mark allows.
func (p *partition) catchUp() {
	for len(p.backlog) > 0 && !p.tooFarAhead() {
		rec := p.backlog[0]
		p.backlog[0] = nil
		p.backlog = p.backlog[1:]
		p.receive(rec)
	}
}

func (p *partition) tooFarAhead() bool { return p.offsets.ahead() >= p.maxAhead }

// receive takes a fetched record in: it is handed out when its lane is
// free, and waits behind its lane otherwise.
func (p *partition) receive(rec *sarama.ConsumerMessage) {
	if !p.offsets.add(rec.Offset) {
		p.markSoon()
		return // acked by an earlier owner
	}
	p.held++
	p.heldBytes += recordSize(rec)
	switch {
	case p.batches != nil:
		p.batches.add(rec, time.Now())
	case p.lanes.push(rec):
		p.launch(rec)
	}
	p.throttle()
}

// finish takes the report of a delivery and hands out the next record of
// its lane.
func (p *partition) finish(d delivered) {
	p.inFlight--
	if p.borrowed > 0 {
		p.borrowed--
		p.sub.slots.giveBack(1)
	}
	if p.batches != nil {
		p.batches.settle(d.rec, d.acked, time.Now())
	}
	if d.acked || p.batches == nil {
		p.held--
		p.heldBytes -= recordSize(d.rec)
	}
	if d.acked {
		p.offsets.done(d.rec.Offset)
		p.markSoon()
	}
	if p.batches == nil {
		if next := p.lanes.finish(d.rec); next != nil && !p.isStopping() {
			p.launch(next)
		}
	}
	p.catchUp()
	p.throttle()
}

// launch hands a record to a delivery: a worker of the subscriber in the
// concurrent mode, a goroutine of its own otherwise.
func (p *partition) launch(rec *sarama.ConsumerMessage) {
	if p.sub.work != nil {
		p.ready = append(p.ready, rec)
		return
	}
	p.inFlight++
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.deliver(rec)
	}()
}

// nextWork returns the worker channel and the job to offer on it, or a
// nil channel when no record is ready or the partition may not take
// another slot now.
func (p *partition) nextWork() (chan<- job, job) {
	if len(p.ready) == 0 || !p.takeSlot() {
		return nil, job{}
	}
	return p.sub.work, job{p: p, rec: p.ready[0]}
}

// takeSlot reports whether the partition holds a slot for its next
// record: one of its own, or a shared one; when none is free, it arranges
// for consume to look again once one is given back.
func (p *partition) takeSlot() bool {
	if p.ticket != noTicket {
		return true
	}
	s := p.sub.slots
	if p.inFlight-p.borrowed < s.own() {
		p.ticket = ownTicket
		return true
	}
	ok, wait := s.borrow(p.inFlight)
	if !ok {
		p.slotFreed = wait
		return false
	}
	p.ticket = sharedTicket
	return true
}

func (p *partition) isStopping() bool {
	select {
	case <-p.stopping:
		return true
	default:
		return false
	}
}

// throttle pauses the fetching of the partition while its records fill
// the buffer or it is too far above its mark, and resumes it once they
// take half of the buffer and the mark has moved.
func (p *partition) throttle() {
	cfg := p.sub.cfg
	switch {
	case !p.paused && (p.held >= cfg.PartitionBufferRecords || p.heldBytes >= cfg.PartitionBufferBytes || p.tooFarAhead()):
		p.pauser.Pause(p.topicPartition())
		p.paused = true
	case p.paused && p.held <= cfg.PartitionBufferRecords/2 && p.heldBytes <= cfg.PartitionBufferBytes/2 && !p.tooFarAhead():
		p.pauser.Resume(p.topicPartition())
		p.paused = false
	}
}

func (p *partition) topicPartition() map[string][]int32 {
	return map[string][]int32{p.claim.Topic(): {p.claim.Partition()}}
}

// markSoon arranges for the low-water mark to be marked within
// markInterval, so that a burst of acks costs one mark.
func (p *partition) markSoon() {
	if p.markDue == nil {
		p.markTimer.Reset(markInterval)
		p.markDue = p.markTimer.C
	}
}

// mark marks the low-water mark, with the offsets acked above it as
// metadata, for sarama's next commit.
func (p *partition) mark() {
	p.markDue = nil
	offset, ok := p.offsets.mark()
	if !ok {
		return
	}
	meta := p.offsets.metadata()
	switch {
	case offset > p.marked:
		p.sess.MarkOffset(p.claim.Topic(), p.claim.Partition(), offset, meta)
	case offset == p.marked && meta != p.markedMeta:
		p.sess.ResetOffset(p.claim.Topic(), p.claim.Partition(), offset, meta)
	default:
		return
	}
	p.marked, p.markedMeta = offset, meta
}

// recordSize is what a record counts against Config.PartitionBufferBytes.
func recordSize(rec *sarama.ConsumerMessage) int {
	n := len(rec.Key) + len(rec.Value)
	for _, h := range rec.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}
