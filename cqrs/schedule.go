package cqrs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/outbox"
)

// ErrCannotSchedule is returned by the scheduling calls (PublishAt,
// PublishAfter, SendAt, SendAfter, Cancel) of an EventPublisher or
// CommandDispatcher whose publisher cannot schedule: only an outbox's
// publishers can (see Scheduled messages in the package doc). It is marked
// koto.Poison: no retry changes it.
var ErrCannotSchedule = koto.Poison(errors.New("cqrs: the publisher cannot schedule messages; " +
	"use DurableOutbox's EventPublisher or CommandDispatcher, or build on an outbox Publisher"))

// scheduler is what an outbox's publishers do beyond publishing
// (outbox.Publisher's Schedule and Cancel).
type scheduler interface {
	Schedule(at time.Time, topic string, msg *message.Message) (string, error)
	Cancel(ctx context.Context, id string) error
}

var _ scheduler = (*outbox.Publisher)(nil)

// schedulerOf returns pub's scheduling side, nil when it has none.
func schedulerOf(pub message.Publisher) scheduler {
	s, _ := pub.(scheduler)
	return s
}

// scheduling is a message.Publisher that schedules the one message it is
// given at at, and keeps its schedule ID.
type scheduling struct {
	s  scheduler
	at time.Time
	id string
}

func (p *scheduling) Publish(topic string, msgs ...*message.Message) error {
	if len(msgs) != 1 {
		return fmt.Errorf("cqrs: scheduling %d messages at once; schedule one", len(msgs))
	}
	var err error
	p.id, err = p.s.Schedule(p.at, topic, msgs[0])
	return err
}

func (p *scheduling) Close() error { return nil }

// verb names a call of a publisher or dispatcher in its errors.
type verb struct{ call, doing, done string }

var (
	verbPublish  = verb{"Publish", "publishing", "published"}
	verbSchedule = verb{"PublishAt", "scheduling", "scheduled"}
	verbSend     = verb{"Send", "sending", "sent"}
	verbSendAt   = verb{"SendAt", "scheduling", "scheduled"}
)

// after returns the time delay from now, or an error wrapping
// outbox.ErrInvalidSchedule for a negative delay.
func after(delay time.Duration) (time.Time, error) {
	if delay < 0 {
		return time.Time{}, koto.Poison(fmt.Errorf("%w: the delay %v is negative; give a delay of zero or more", outbox.ErrInvalidSchedule, delay))
	}
	return time.Now().Add(delay), nil
}

// cancel cancels the schedule id through s.
func cancel(ctx context.Context, s scheduler, id string) error {
	if s == nil {
		return ErrCannotSchedule
	}
	if err := s.Cancel(ctx, id); err != nil {
		return fmt.Errorf("cqrs: cancel %s: %w", id, err)
	}
	return nil
}
