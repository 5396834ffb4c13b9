package cqrs

import (
	"context"
	"fmt"
	"time"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/internal/config"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/telemetry"
	"github.com/koto-dev/watermill-koto/topics"
)

// EventPublisherConfig configures an EventPublisher.
type EventPublisherConfig struct {
	// Service is the name of the publishing service. An event goes to
	// topics.Event(Service, topics.TypeName(event)) unless a route says
	// otherwise. Required.
	Service string

	// Routes send event types to explicit topics.
	Routes []Route

	// Timeout is the longest a Publish takes (see the package doc).
	// Default: 10s.
	Timeout time.Duration

	// Telemetry traces and measures the events published. Nil:
	// OpenTelemetry's global providers.
	Telemetry *telemetry.Telemetry
}

func (c *EventPublisherConfig) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
}

// Validate reports every problem of the configuration, zero fields
// counting as their defaults, in one error that wraps koto.ErrInvalidConfig
// (and [ErrInvalidRoute] for a bad route).
func (c EventPublisherConfig) Validate() error {
	p := config.For("cqrs.EventPublisherConfig")
	validateService(p, "Service", c.Service, c.Routes)
	validateTimeout(p, c.Timeout)
	return p.Err()
}

// validateService checks the service name in field and the routes.
func validateService(p *config.Problems, field, service string, routes []Route) {
	if service == "" {
		p.Add(field, "is empty; set it to the service's name, such as \"orders\"")
	} else if err := topics.Validate(service); err != nil {
		p.Add(field, "%q cannot prefix a topic: %w", service, err)
	}
	if _, err := routeTable(routes); err != nil {
		p.Add("Routes", "%w", err)
	}
}

// errNilPublisher is the error of a constructor given no publisher.
var errNilPublisher = fmt.Errorf("%w: the publisher is nil; pass a message.Publisher, such as broker.NewPublisher's or an outbox's ContextPublisher", koto.ErrInvalidConfig)

// validateTimeout checks the Timeout field of a configuration.
func validateTimeout(p *config.Problems, d time.Duration) {
	if d < 0 {
		p.Add("Timeout", "is negative (%s); use 0 for the default (%s) or a positive duration", d, defaultTimeout)
	}
}

// EventPublisher publishes integration events (see Publishing in the
// package doc). It is safe for concurrent use.
type EventPublisher struct {
	enc     encoder
	tel     *telemetry.Telemetry
	pub     message.Publisher
	sched   scheduler // nil unless pub schedules
	service string
	routes  map[string]string
	timeout time.Duration
}

// NewEventPublisher returns an EventPublisher that publishes through pub,
// typically a broker.NewPublisher.
func NewEventPublisher(pub message.Publisher, cfg EventPublisherConfig) (*EventPublisher, error) {
	if pub == nil {
		return nil, errNilPublisher
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	routes, _ := routeTable(cfg.Routes)
	tel, err := telemetryOf(cfg.Telemetry)
	if err != nil {
		return nil, err
	}
	return &EventPublisher{
		tel: tel, pub: tel.Publisher(pub), sched: schedulerOf(pub),
		service: cfg.Service, routes: routes, timeout: cfg.Timeout,
	}, nil
}

// Publish publishes event, a value or pointer of a named struct type, and
// returns once the publisher has it (for the broker's publisher: once Kafka
// has acknowledged it), or with an error matching [ErrTimeout] at the
// deadline of ctx or the configured Timeout. The package doc says what the
// message carries (Publishing) and what a timeout leaves (Deadlines and
// broker faults).
func (p *EventPublisher) Publish(ctx context.Context, event any) error {
	return p.publish(ctx, p.pub, verbPublish, event)
}

// PublishAt schedules event to be published at at, through the outbox it
// is written into, in the transaction of ctx as Publish writes (see
// Scheduled messages in the package doc), and returns the schedule's ID
// for [EventPublisher.Cancel]. A time already past is due at once; the
// zero time is an error wrapping outbox.ErrInvalidSchedule. A publisher
// that is not an outbox's returns [ErrCannotSchedule].
func (p *EventPublisher) PublishAt(ctx context.Context, at time.Time, event any) (string, error) {
	if p.sched == nil {
		return "", ErrCannotSchedule
	}
	s := &scheduling{s: p.sched, at: at}
	err := p.publish(ctx, p.tel.Publisher(s), verbSchedule, event)
	return s.id, err
}

// PublishAfter is [EventPublisher.PublishAt] delay from now; a negative
// delay is an error wrapping outbox.ErrInvalidSchedule.
func (p *EventPublisher) PublishAfter(ctx context.Context, delay time.Duration, event any) (string, error) {
	at, err := after(delay)
	if err != nil {
		return "", err
	}
	return p.PublishAt(ctx, at, event)
}

// Cancel cancels the scheduled event id in the transaction of ctx, as
// outbox.Publisher's Cancel does: once that commits, the event is never
// published. The error of an event no longer scheduled wraps
// outbox.ErrSent, outbox.ErrCancelled or outbox.ErrUnknownSchedule.
func (p *EventPublisher) Cancel(ctx context.Context, id string) error {
	return cancel(ctx, p.sched, id)
}

// publish publishes event through pub; v names the call in errors.
func (p *EventPublisher) publish(ctx context.Context, pub message.Publisher, v verb, event any) error {
	if event == nil {
		return fmt.Errorf("cqrs: %s of a nil event", v.call)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	name := p.enc.name(event)
	topic, err := topicFor(p.service, p.routes, name)
	if err != nil {
		return fmt.Errorf("cqrs: %s %s: %w", v.doing, name, err)
	}
	ctx, budget, cancel := callContext(ctx, p.timeout, nil)
	defer cancel()
	ctx, _ = correlation.Ensure(ctx)
	if err := p.enc.publish(ctx, pub, topic, event, name, nil); err != nil {
		return failed(ctx, err, v.doing+" "+name,
			fmt.Sprintf("%s not %s within %s; it may still be", name, v.done, round(budget)))
	}
	return nil
}

// topicFor returns the topic of a message type: its route, or
// topics.Event(service, name).
func topicFor(service string, routes map[string]string, name string) (string, error) {
	if topic, ok := routes[name]; ok {
		return topic, nil
	}
	topic := topics.Event(service, name)
	if err := topics.Validate(topic); err != nil {
		return "", fmt.Errorf("%w for %s: %w", ErrInvalidRoute, name, err)
	}
	return topic, nil
}
