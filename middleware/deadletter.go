package middleware

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/koto-dev/watermill-koto/internal/dlqmeta"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/internal/config"
	"github.com/koto-dev/watermill-koto/internal/logattr"
	"github.com/koto-dev/watermill-koto/internal/retry"
	"github.com/koto-dev/watermill-koto/topics"
)

// Defaults of [DeadLetterConfig].
const (
	defaultMaxAttempts    = 5
	defaultMaxElapsedTime = time.Minute
)

// DeadLetterConfig configures [DeadLetter]. The zero value is the default.
type DeadLetterConfig struct {
	// Topic is the dead-letter topic. Default: topics.DeadLetter of the
	// consumer group, e.g. "payments.order-placed-consumer.dlq".
	Topic string
	// ConsumerGroup returns the consumer group a message was consumed by,
	// which names the default topic. Default [HandlerName].
	ConsumerGroup func(msg *message.Message) string
	// MaxAttempts is how many times the handler may fail with a retryable
	// error in one delivery; outages do not count. Default 5; 1
	// dead-letters the first failure.
	MaxAttempts int
	// MaxElapsedTime bounds the retries of retryable errors, from the first
	// failure. Default 1m.
	MaxElapsedTime time.Duration
	// Backoff spaces the retries, of outages and retryable errors alike.
	Backoff koto.Backoff
	// Classify decides what to do with a handler error. Default
	// koto.ClassOf.
	Classify func(err error) koto.Class
	// Parking, when it has Delays, gives a message whose attempts failed
	// with a retryable error later attempts at those delays before its
	// dead letter, parked in Parking.Store (see Parking in the package
	// doc).
	Parking ParkingConfig
}

func (c *DeadLetterConfig) setDefaults() {
	if c.ConsumerGroup == nil {
		c.ConsumerGroup = HandlerName
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = defaultMaxAttempts
	}
	if c.MaxElapsedTime == 0 {
		c.MaxElapsedTime = defaultMaxElapsedTime
	}
	if c.Classify == nil {
		c.Classify = koto.ClassOf
	}
}

// Validate reports every invalid field of c, its Backoff included, zero
// fields counting as their defaults, in one error that wraps
// koto.ErrInvalidConfig.
func (c DeadLetterConfig) Validate() error {
	p := config.For("middleware.DeadLetterConfig")
	c.validate(p)
	return p.Err()
}

func (c DeadLetterConfig) validate(p *config.Problems) {
	c.setDefaults()
	if c.Topic != "" {
		if err := topics.Validate(c.Topic); err != nil {
			p.Add("Topic", "%w; or leave it empty for the default, topics.DeadLetter(consumer group)", err)
		}
	}
	if c.MaxAttempts < 0 {
		p.Add("MaxAttempts", "is negative (%d); use 0 for the default (%d) or a positive count", c.MaxAttempts, defaultMaxAttempts)
	}
	if c.MaxElapsedTime < 0 {
		p.Add("MaxElapsedTime", "is negative (%v); use 0 for the default (%v) or a positive duration", c.MaxElapsedTime, defaultMaxElapsedTime)
	}
	p.Nest("Backoff", c.Backoff.Validate())
	c.Parking.validate(p)
}

// HandlerName returns the name of the router handler that consumes msg:
// by convention, its consumer group.
func HandlerName(msg *message.Message) string {
	return message.HandlerNameFromCtx(msg.Context())
}

// DeadLetter retries a failing handler with backoff and publishes a
// message that is poison, or that exhausted its retries, to the
// dead-letter topic with pub, then acks it (see Errors and Dead letters in
// the package doc). When the dead letter cannot be published, or the
// message's context ends, the error is returned and the router nacks the
// message: it is never lost. It recovers the handler's panics
// ([PanicError]), and acks another client's probe without calling the
// handler (see Probes in the package doc).
func DeadLetter(pub message.Publisher, cfg DeadLetterConfig) (message.HandlerMiddleware, error) {
	p := config.For("middleware.DeadLetterConfig")
	if pub == nil {
		p.Add("", "has no publisher: DeadLetter got nil; pass the publisher that sends dead letters")
	}
	cfg.validate(p)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return newDeadLetter(pub, cfg).middleware, nil
}

// newDeadLetter is the dead-lettering of a valid cfg, with its parking.
func newDeadLetter(pub message.Publisher, cfg DeadLetterConfig) *deadLetter {
	cfg.setDefaults()
	d := &deadLetter{pub: pub, cfg: cfg}
	if cfg.Parking.enabled() {
		d.park = &parker{cfg: cfg.Parking, backoff: cfg.Backoff}
	}
	return d
}

type deadLetter struct {
	pub  message.Publisher
	cfg  DeadLetterConfig
	park *parker // nil: no parking
}

// delivery is the retry state of one delivery of one message.
type delivery struct {
	attempts     int // handler calls
	failures     int // retryable failures
	firstFailure time.Time
	dead         *koto.Class // set when the failure is to be dead-lettered
}

func (d *deadLetter) middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		if probe := msg.Metadata.Get(koto.ProbeMetadataKey); probe != "" {
			reportFrom(msg.Context()).set(outcomeProbe, slog.String(logattr.Probe, probe))
			return nil, nil
		}
		if err := koto.InvalidRecord(msg); err != nil {
			return d.send(msg, koto.Poison(err), koto.ClassPoison, 0, nil)
		}
		ctx := msg.Context()
		group := d.cfg.ConsumerGroup(msg)
		if owner := msg.Metadata.Get(ParkedGroupKey); owner != "" && owner != group {
			// Another group's parked message, come back through the topic.
			reportFrom(ctx).set(outcomeDuplicate, slog.String(logattr.ParkedFor, owner))
			return nil, nil
		}
		var entry *Parked
		if d.park != nil && group != "" {
			var g gate
			var err error
			switch entry, g, err = d.park.before(ctx, msg, group); {
			case err != nil && koto.ClassOf(err) == koto.ClassPoison:
				// It cannot wait behind its key's parked messages.
				return d.send(msg, err, koto.ClassPoison, 0, nil)
			case err != nil || g == gateParked:
				return nil, err
			case entry != nil && entry.DeadLetter:
				return d.deadLetterParked(msg, ErrDeadLetterRequested, koto.ClassPoison, 0, entry)
			}
		}
		produced, s, err := d.attempts(ctx, h, msg)
		switch {
		case err == nil && entry != nil:
			if err := d.park.release(ctx, entry); err != nil {
				return nil, err
			}
			return produced, nil
		case err == nil:
			return produced, nil
		case s.dead == nil:
			return nil, err
		case *s.dead == koto.ClassRetryable && d.park != nil && group != "":
			if delay, ok := d.park.next(entry, err); ok {
				perr := d.park.park(ctx, msg, group, entry, s.attempts, err, delay)
				if perr == nil || koto.ClassOf(perr) != koto.ClassPoison {
					return nil, perr
				}
				err = errors.Join(err, perr) // it cannot be parked: its dead letter says why
			}
		}
		return d.deadLetterParked(msg, err, *s.dead, s.attempts, entry)
	}
}

// attempts runs h on msg, retrying in place as the package doc says, and
// returns the outcome of its last attempt and the delivery's state.
func (d *deadLetter) attempts(ctx context.Context, h message.HandlerFunc, msg *message.Message) ([]*message.Message, *delivery, error) {
	rep := reportFrom(ctx)
	var s delivery
	var produced []*message.Message
	err := retry.Do(ctx, d.cfg.Backoff.Delay, func() error {
		s.attempts++
		msg.SetContext(ctx) // a failed attempt may have replaced it
		rep.setAttempts(s.attempts)
		var err error
		produced, err = callRecovering(h, msg)
		return err
	}, func(f retry.Failure) error {
		if ctx.Err() != nil {
			return f.Err
		}
		class := d.cfg.Classify(f.Err)
		if d.giveUp(&s, class, f.Err, f.Delay) {
			s.dead = &class
			return f.Err
		}
		rep.retry(retryNote{err: f.Err, class: class, attempt: s.attempts, delay: f.Delay})
		return nil
	}, nil)
	return produced, &s, err
}

// deadLetterParked dead-letters msg, with the history of entry if it was
// parked, and then ends entry's parking.
func (d *deadLetter) deadLetterParked(msg *message.Message, cause error, class koto.Class, attempts int, entry *Parked) ([]*message.Message, error) {
	if _, err := d.send(msg, cause, class, attempts, entry); err != nil {
		return nil, err
	}
	if entry != nil {
		if err := d.park.release(msg.Context(), entry); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// giveUp counts a failure of class and reports whether to dead-letter, or
// park, now rather than retry after delay. A failure that asks for a later
// retry (koto.RetryAfter) is parked at once where parking is on.
func (d *deadLetter) giveUp(s *delivery, class koto.Class, err error, delay time.Duration) bool {
	switch class {
	case koto.ClassPoison:
		return true
	case koto.ClassOutage:
		return false
	}
	if _, ok := koto.RetryDelay(err); ok && d.park != nil {
		return true
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
			produced, err = nil, koto.Poison(&PanicError{Value: v, Stack: string(debug.Stack())})
		}
	}()
	return h(msg)
}

// send publishes the dead letter of msg, with the history of its parking
// entry if it was parked, and acks msg, or returns the error so that msg
// is nacked.
func (d *deadLetter) send(msg *message.Message, cause error, class koto.Class, attempts int, entry *Parked) ([]*message.Message, error) {
	group := d.cfg.ConsumerGroup(msg)
	topic, err := d.topic(group)
	if err != nil {
		return nil, errors.Join(cause, err)
	}
	dl := deadLetterMessage(msg, cause, class, attempts, group, entry)
	err = d.pub.Publish(topic, dl)
	if errors.Is(err, koto.ErrMessageTooLarge) {
		// Nacked, it would come back and be refused again, for ever.
		dl = droppedLetter(dl, err)
		err = d.pub.Publish(topic, dl)
	}
	if err != nil {
		return nil, errors.Join(cause, fmt.Errorf("middleware: publish dead letter to %s: %w", topic, err))
	}
	note := deadLetterNote{cause: cause, class: class, errorType: dl.Metadata.Get(dlqmeta.ErrorType)}
	reportFrom(msg.Context()).deadLettered(note,
		slog.String(logattr.Error, cause.Error()),
		slog.String(logattr.ErrorClass, class.String()),
		slog.String(logattr.DeadLetterTopic, topic))
	return nil, nil
}

// topic returns the dead-letter topic for a consumer group.
func (d *deadLetter) topic(group string) (string, error) {
	if d.cfg.Topic != "" {
		return d.cfg.Topic, nil
	}
	if group == "" {
		return "", config.Invalid("middleware.DeadLetterConfig", "", "gives no dead-letter topic: no consumer group (no handler name in the message context); set Topic or ConsumerGroup")
	}
	topic := topics.DeadLetter(group)
	if err := topics.Validate(topic); err != nil {
		return "", config.Invalid("middleware.DeadLetterConfig", "", "gives no valid dead-letter topic for consumer group %q: %w; set Topic or ConsumerGroup", group, err)
	}
	return topic, nil
}
