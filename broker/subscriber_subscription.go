package broker

import (
	"context"
	"errors"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/internal/retry"
)

// subscription is one Subscribe: a consumer group member on one topic,
// reconnected until its context ends or the subscriber closes.
type subscription struct {
	*Subscriber
	topic  string
	logger watermill.LoggerAdapter
	output chan *message.Message // unbuffered: nothing is handed out ahead of the reader

	ctx     context.Context // ends the subscription
	cancel  context.CancelFunc
	release func() bool // detaches ctx from the subscriber's life

	msgBase context.Context // the Subscribe context's values, without its end

	instanceID string // the member's group instance ID, with Config.GroupInstanceID
}

func newSubscription(ctx context.Context, s *Subscriber, topic string) *subscription {
	sub := &subscription{
		Subscriber: s,
		topic:      topic,
		logger:     s.logger.With(watermill.LogFields{"topic": topic}),
		output:     make(chan *message.Message),
		msgBase:    context.WithoutCancel(ctx),
	}
	sub.ctx, sub.cancel = context.WithCancel(ctx)
	sub.release = context.AfterFunc(s.life, sub.cancel)
	return sub
}

// run consumes with conn, then with new connections after each failure,
// until the subscription ends.
func (sub *subscription) run(conn *groupConn) {
	defer sub.wg.Done()
	defer sub.instanceIDs.release(sub.instanceID)
	defer close(sub.output) // after every partition ended: nothing sends on it any more
	defer sub.cancel()
	defer sub.release()
	for conn != nil {
		sub.consume(conn)
		conn = sub.reconnect()
	}
}

// consume runs the consumer group's sessions, one per rebalance, until
// the subscription ends or a session fails; then it closes conn.
func (sub *subscription) consume(conn *groupConn) {
	errorsLogged := make(chan struct{})
	go sub.logErrors(conn.group, errorsLogged)
	handler := &groupHandler{sub: sub, conn: conn}
	for sub.ctx.Err() == nil {
		err := conn.group.Consume(sub.ctx, []string{sub.topic}, handler)
		if err != nil {
			if sub.ctx.Err() == nil {
				sub.logger.Error("Consumer group session failed; reconnecting", err, nil)
			}
			break
		}
	}
	if err := conn.close(); err != nil {
		sub.logger.Info("Closing the consumer group connection failed", watermill.LogFields{"err": err.Error()})
	}
	<-errorsLogged
}

// logErrors logs what the consumer group reports, until it is closed.
func (sub *subscription) logErrors(group sarama.ConsumerGroup, done chan<- struct{}) {
	defer close(done)
	for err := range group.Errors() {
		if !errors.Is(err, context.Canceled) {
			sub.logger.Error("Kafka consumer error", err, nil)
		}
	}
}

// reconnect connects again, every Config.ReconnectRetrySleep until it
// succeeds; nil when the subscription ended first.
func (sub *subscription) reconnect() *groupConn {
	pause := func(int) time.Duration { return max(sub.cfg.ReconnectRetrySleep, 0) }
	if retry.Sleep(sub.ctx, pause(0)) != nil {
		return nil
	}
	var conn *groupConn
	err := retry.Do(sub.ctx, pause,
		func() (err error) { conn, err = sub.connect(sub.instanceID); return err },
		func(f retry.Failure) error {
			sub.logger.Error("Cannot reconnect the consumer", f.Err, watermill.LogFields{"retry_in": f.Delay.String()})
			return nil
		}, nil)
	if err != nil {
		return nil
	}
	sub.logger.Info("Consumer reconnected", nil)
	return conn
}
