package broker

import (
	"context"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/internal/retry"
)

// job is a record handed to a worker of the subscriber.
type job struct {
	p   *partition
	rec *sarama.ConsumerMessage
}

// startWorkersOnce starts, in the concurrent mode, the workers that bound
// the messages in flight of the subscriber, once its first subscription
// connected: a subscriber never used holds no goroutine. They stop at
// Close. The caller is a counted subscription, so wg is above zero.
func (s *Subscriber) startWorkersOnce() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.work == nil || s.working {
		return
	}
	s.working = true
	n := s.cfg.Concurrency
	s.wg.Add(n)
	for range n {
		go func() {
			defer s.wg.Done()
			for {
				select {
				case j := <-s.work:
					j.p.deliver(j.rec)
					j.p.wg.Done()
				case <-s.life.Done():
					return
				}
			}
		}()
	}
}

// deliver hands a record out until it is acked or the partition stops,
// and reports which.
func (p *partition) deliver(rec *sarama.ConsumerMessage) {
	d := delivered{rec: rec, acked: p.handOut(rec)}
	select {
	case p.results <- d:
	case <-p.gone:
	}
}

// handOut sends the message of rec to the subscription's reader and waits
// for its ack; a nack sends it again after Config.NackResendSleep. It
// returns false when the partition stopped first. The message's context
// ends once it is acked or nacked, as Watermill's subscribers do.
func (p *partition) handOut(rec *sarama.ConsumerMessage) bool {
	msg, ok := p.decode(rec)
	for ok {
		ctx, done := context.WithCancel(p.messageContext(p.ctx, rec))
		msg.SetContext(ctx)
		acked, again := p.offer(msg)
		done()
		if !again {
			return acked
		}
		if p.isStopping() || p.pause(p.sub.cfg.NackResendSleep) != nil {
			return false
		}
		msg = msg.Copy() // a fresh ack
	}
	return false
}

// offer hands msg out once: acked, or nacked (again), or neither when the
// partition stopped first.
func (p *partition) offer(msg *message.Message) (acked, again bool) {
	select {
	case p.sub.output <- msg:
	case <-p.stopping:
		return false, false
	}
	select {
	case <-msg.Acked():
		return true, false
	case <-msg.Nacked():
		return false, true
	case <-p.gone:
		return false, false
	}
}

// decode turns rec into a message. A record the Marshaler refuses is
// tried again every Config.ReconnectRetrySleep, holding its lane: it is
// never skipped. ok is false when the partition stopped first.
func (p *partition) decode(rec *sarama.ConsumerMessage) (msg *message.Message, ok bool) {
	err := retry.Do(p.stopCtx, func(int) time.Duration { return max(p.sub.cfg.ReconnectRetrySleep, 0) },
		func() (err error) { msg, err = p.sub.cfg.Marshaler.Unmarshal(rec); return err },
		func(f retry.Failure) error {
			p.logger.Error("Cannot unmarshal a record; it holds its key until it can", f.Err,
				watermill.LogFields{"kafka_partition_offset": rec.Offset, "retry_in": f.Delay.String()})
			return nil
		}, nil)
	if err != nil {
		return nil, false
	}
	return msg, true
}

// pause waits d, or until the partition stops.
func (p *partition) pause(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return retry.Sleep(p.stopCtx, d)
}

// messageContext is the context of the message of rec, a child of
// parent: where rec was read from and in which generation.
func (p *partition) messageContext(parent context.Context, rec *sarama.ConsumerMessage) context.Context {
	return withPosition(parent, rec, p.sess.GenerationID())
}
