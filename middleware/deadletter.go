package middleware

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/topics"
)

// DeadLetterConfig configures [DeadLetter]. The zero value is the default.
type DeadLetterConfig struct {
	// Topic is the dead-letter topic. Default: topics.DeadLetter of the
	// consumer group, e.g. "payments.order-placed-consumer.dlq".
	Topic string
	// ConsumerGroup returns the consumer group a message was consumed by,
	// which names the default topic and fills [DeadLetterConsumerGroupKey].
	// Default [HandlerName]: by this project's convention the handler name
	// is the consumer group.
	ConsumerGroup func(msg *message.Message) string
	// MaxAttempts is how many times the handler may fail with a Retryable
	// error in one delivery; the last failure is dead-lettered. Outages do
	// not count. Default 5; 1 dead-letters the first failure.
	MaxAttempts int
	// MaxElapsedTime bounds the retries of Retryable errors: no retry is
	// scheduled later than this after the first such failure. Default 1 min.
	MaxElapsedTime time.Duration
	// Backoff spaces the retries, Retryable and Outage alike.
	Backoff Backoff
	// Classify decides what to do with a handler error. Default [Classify].
	Classify func(err error) ErrorClass
}

func (c *DeadLetterConfig) setDefaults() {
	if c.ConsumerGroup == nil {
		c.ConsumerGroup = HandlerName
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
	if c.MaxElapsedTime == 0 {
		c.MaxElapsedTime = time.Minute
	}
	if c.Classify == nil {
		c.Classify = Classify
	}
	c.Backoff.setDefaults()
}

// Validate reports the first invalid field of c, zero fields counting as
// their defaults, with an error that wraps [ErrInvalidConfig]. DeadLetter
// calls it.
func (c DeadLetterConfig) Validate() error {
	c.setDefaults()
	if c.Topic != "" {
		if err := topics.Validate(c.Topic); err != nil {
			return invalid("DeadLetterConfig.Topic: %w; or leave it empty for the default, topics.DeadLetter(consumer group)", err)
		}
	}
	switch {
	case c.MaxAttempts < 0:
		return invalid("DeadLetterConfig.MaxAttempts is negative (%d); use 0 for the default (5) or a positive count", c.MaxAttempts)
	case c.MaxElapsedTime < 0:
		return invalid("DeadLetterConfig.MaxElapsedTime is negative (%v); use 0 for the default (1m) or a positive duration", c.MaxElapsedTime)
	}
	return c.Backoff.validate("DeadLetterConfig.Backoff")
}

// HandlerName returns the name of the router handler that consumes msg
// (message.HandlerNameFromCtx). It is the default consumer group of
// [DeadLetterConfig] and the default scope of [IdempotencyConfig].
func HandlerName(msg *message.Message) string {
	return message.HandlerNameFromCtx(msg.Context())
}

// DeadLetter retries a failing handler with exponential backoff and, when
// the error is poison or the retries are exhausted, publishes the message to
// the dead-letter topic with pub and acks it, so the partition moves on.
//
// What happens to an error depends on its [ErrorClass] (cfg.Classify):
// Poison ([Permanent] errors, such as a payload that does not decode, and
// panics) is dead-lettered at once; Retryable errors are retried up to
// cfg.MaxAttempts and cfg.MaxElapsedTime, then dead-lettered; an Outage
// ([Transient] errors, unreachable databases, store errors) is retried
// with backoff for as long as the message's context lives and never
// dead-lettered. When the context ends (the router or subscriber closes)
// the last error is returned and the router nacks the message.
//
// The dead letter is a copy of the message, with its UUID, payload and
// metadata, plus the metadata listed at [DeadLetterReasonKey]. If
// publishing it fails, the error is returned: the message is nacked and
// redelivered, never lost. Messages the handler returned are dropped with a
// dead-lettered message.
//
// A message for which there is no valid dead-letter topic (no Topic, and no
// consumer group, or one that gives an invalid topic name) is nacked with
// an error that wraps [ErrInvalidConfig].
//
// DeadLetter recovers panics of the handler ([PanicError]), so Watermill's
// Recoverer is not needed inside it. It reports retries and its outcome to
// [Logging]. See [Defaults] for where it goes in the chain.
func DeadLetter(pub message.Publisher, cfg DeadLetterConfig) (message.HandlerMiddleware, error) {
	if pub == nil {
		return nil, invalid("DeadLetter: the publisher is nil; pass the publisher that sends dead letters")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &deadLetter{pub: pub, cfg: cfg}
	return d.middleware, nil
}

type deadLetter struct {
	pub message.Publisher
	cfg DeadLetterConfig
}

// delivery is the retry state of one delivery of one message.
type delivery struct {
	attempts     int // handler calls
	retries      int // backoff waits so far
	failures     int // Retryable failures
	firstFailure time.Time
}

func (d *deadLetter) middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		ctx := msg.Context()
		rep := reportFrom(ctx)
		var s delivery
		for {
			msg.SetContext(ctx) // a failed attempt may have replaced it
			s.attempts++
			rep.setAttempts(s.attempts)
			produced, err := callRecovering(h, msg)
			if err == nil {
				return produced, nil
			}
			if ctx.Err() != nil {
				return nil, err
			}
			class := d.cfg.Classify(err)
			delay := d.cfg.Backoff.Delay(s.retries)
			if d.giveUp(&s, class, delay) {
				return d.send(msg, err, class, s.attempts)
			}
			rep.retry(retryNote{err: err, class: class, attempt: s.attempts, delay: delay})
			s.retries++
			if !sleep(ctx, delay) {
				return nil, err
			}
		}
	}
}

// giveUp counts a failure of class and reports whether to dead-letter now
// rather than retry after delay.
func (d *deadLetter) giveUp(s *delivery, class ErrorClass, delay time.Duration) bool {
	switch class {
	case Poison:
		return true
	case Outage:
		return false
	}
	s.failures++
	if s.failures == 1 {
		s.firstFailure = time.Now()
	}
	return s.failures >= d.cfg.MaxAttempts ||
		time.Since(s.firstFailure)+delay > d.cfg.MaxElapsedTime
}

// callRecovering calls h and turns a panic into a *PanicError.
func callRecovering(h message.HandlerFunc, msg *message.Message) (produced []*message.Message, err error) {
	defer func() {
		if v := recover(); v != nil {
			produced, err = nil, &PanicError{Value: v, Stack: string(debug.Stack())}
		}
	}()
	return h(msg)
}

// send publishes the dead letter of msg and acks msg, or returns the error
// so that msg is nacked.
func (d *deadLetter) send(msg *message.Message, cause error, class ErrorClass, attempts int) ([]*message.Message, error) {
	group := d.cfg.ConsumerGroup(msg)
	topic, err := d.topic(group)
	if err != nil {
		return nil, errors.Join(cause, err)
	}
	dl := deadLetterMessage(msg, cause, class, attempts, group)
	if err := d.pub.Publish(topic, dl); err != nil {
		return nil, errors.Join(cause, fmt.Errorf("middleware: publish dead letter to %s: %w", topic, err))
	}
	reportFrom(msg.Context()).set(OutcomeDeadLettered,
		slog.String(ErrorAttr, cause.Error()),
		slog.String(ErrorClassAttr, class.String()),
		slog.String(DeadLetterTopicAttr, topic))
	return nil, nil
}

// topic returns the dead-letter topic for a consumer group.
func (d *deadLetter) topic(group string) (string, error) {
	if d.cfg.Topic != "" {
		return d.cfg.Topic, nil
	}
	if group == "" {
		return "", invalid("no dead-letter topic: no consumer group (no handler name in the message context); set DeadLetterConfig.Topic or ConsumerGroup")
	}
	topic := topics.DeadLetter(group)
	if err := topics.Validate(topic); err != nil {
		return "", invalid("dead-letter topic of consumer group %q: %w; set DeadLetterConfig.Topic or ConsumerGroup", group, err)
	}
	return topic, nil
}
