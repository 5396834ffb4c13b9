package middleware

import (
	"context"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/internal/logattr"
	"github.com/koto-dev/watermill-koto/internal/retry"
)

// parker is the parking of a DeadLetter middleware.
type parker struct {
	cfg     ParkingConfig
	backoff koto.Backoff
	keys    parkedKeys
}

// gate is what becomes of a message before its handler runs.
type gate int

const (
	gateRun    gate = iota // run the handler
	gateParked             // parked behind its key's parked messages: ack it
)

// before decides what to do with msg of group: a redelivery of a parked
// entry runs as that entry; a message whose key has parked messages is
// parked behind them. Store errors are retried in place while ctx lives.
func (p *parker) before(ctx context.Context, msg *message.Message, group string) (entry *Parked, g gate, err error) {
	if id := msg.Metadata.Get(ParkedIDKey); id != "" {
		err := p.store(ctx, func(ctx context.Context) (err error) {
			var ok bool
			if entry, ok, err = p.cfg.Store.Load(ctx, group, id); !ok {
				entry = nil // a copy of an entry no longer parked: a message like any other
			}
			return err
		})
		return entry, gateRun, err
	}
	pos, ok := koto.PositionFromContext(ctx)
	if !ok || len(pos.Key) == 0 {
		return nil, gateRun, nil
	}
	if parked, known := p.keys.known(group, pos); known && !parked {
		return nil, gateRun, nil
	}
	var parked bool
	err = p.store(ctx, func(ctx context.Context) (err error) {
		parked, err = p.keys.parked(ctx, group, pos, func(ctx context.Context) ([][]byte, error) {
			return p.cfg.Store.ParkedKeys(ctx, group, pos.Topic, pos.Partition)
		})
		if err != nil || !parked {
			return err
		}
		parked, err = p.cfg.Store.ParkBehind(ctx, newParked(msg, group, pos))
		return err
	})
	switch {
	case err != nil:
		return nil, gateRun, err
	case !parked:
		p.keys.remove(group, pos)
		return nil, gateRun, nil
	}
	reportFrom(ctx).set(outcomeParked, slog.Bool(logattr.ParkedBehind, true))
	return nil, gateParked, nil
}

// next returns the delay of the next parking of entry (nil: a message not
// parked yet), and whether a parking is left: RetryAfter's delay, or the
// next of Delays.
func (p *parker) next(entry *Parked, cause error) (time.Duration, bool) {
	n := 0
	if entry != nil {
		n = entry.Parkings
	}
	if n >= len(p.cfg.Delays) {
		return 0, false
	}
	if d, ok := koto.RetryDelay(cause); ok {
		return d, true
	}
	return p.cfg.Delays[n], true
}

// park parks msg, whose delivery failed attempts times with cause, for
// delay: a new entry, or entry parked again.
func (p *parker) park(ctx context.Context, msg *message.Message, group string, entry *Parked, attempts int, cause error, delay time.Duration) error {
	now := time.Now()
	if entry == nil {
		entry = newParked(msg, group, positionFrom(ctx, message.SubscribeTopicFromCtx(ctx)).Position)
	}
	entry.Parkings++
	entry.DueAt = now.Add(delay)
	entry.History = append(entry.History, ParkedAttempt{FailedAt: now.UTC(), Attempts: attempts, Error: cause.Error(), RetryAt: entry.DueAt.UTC()})
	if err := p.store(ctx, func(ctx context.Context) error { return p.cfg.Store.Park(ctx, entry) }); err != nil {
		return err
	}
	if len(entry.Position.Key) > 0 {
		p.keys.add(group, entry.Position)
	}
	reportFrom(ctx).set(outcomeParked,
		slog.String(logattr.Error, cause.Error()),
		slog.String(logattr.ParkedID, entry.ID),
		slog.Time(logattr.RetryAt, entry.DueAt))
	return nil
}

// release ends entry's parking: its key's next message comes back now.
func (p *parker) release(ctx context.Context, entry *Parked) error {
	return p.store(ctx, func(ctx context.Context) error { return p.cfg.Store.Release(ctx, entry) })
}

// store calls fn until it succeeds, retrying its errors, outages all,
// with the backoff while ctx lives; each retry is reported as one. A
// poison error (a message the store cannot keep) ends it at once.
func (p *parker) store(ctx context.Context, fn func(ctx context.Context) error) error {
	rep := reportFrom(ctx)
	stopped := func(err error) error { return koto.Outage(fmt.Errorf("middleware: parking: %w", err)) }
	return retry.Do(ctx, p.backoff.Delay, func() error { return fn(ctx) }, func(f retry.Failure) error {
		switch {
		case koto.ClassOf(f.Err) == koto.ClassPoison:
			return fmt.Errorf("middleware: parking: %w", f.Err)
		case ctx.Err() != nil:
			return stopped(f.Err)
		}
		rep.retry(retryNote{err: f.Err, class: koto.ClassOutage, attempt: f.Retry, delay: f.Delay})
		return nil
	}, stopped)
}

// newParked is a new entry for msg, consumed by group at pos: its
// redelivery is a copy of msg with the parking's metadata keys, the
// correlation ID of its context and, when its metadata has none, its
// record key as its partition key.
func newParked(msg *message.Message, group string, pos koto.Position) *Parked {
	id := correlation.NewID()
	m := msg.Copy()
	m.SetContext(msg.Context())
	correlation.Stamp(msg.Context(), m)
	m.Metadata.Set(ParkedIDKey, id)
	m.Metadata.Set(ParkedGroupKey, group)
	if m.Metadata.Get(koto.PartitionKeyMetadataKey) == "" && len(pos.Key) > 0 && utf8.Valid(pos.Key) {
		m.Metadata.Set(koto.PartitionKeyMetadataKey, string(pos.Key))
	}
	return &Parked{ID: id, Group: group, Position: pos, Message: m}
}
