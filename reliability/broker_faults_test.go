package reliability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

// faultLimit bounds the whole stream of TestBrokerFaults, faults included.
const faultLimit = 3 * time.Minute

// requestTimeout is the Timeout of the dispatcher in TestBrokerFaults;
// a Request under a fault must end with an error within requestHang.
const (
	requestTimeout = time.Second
	requestHang    = 15 * requestTimeout
)

// TestBrokerFaults streams 5 000 messages (by default: 1 500) through an idempotent
// consumer whose handler publishes an event per message, while the broker
// fails under it: it is closed and restarted on its data directory, then
// fails every produce, then every fetch, then every offset commit. The
// close and the produce fault each begin while the handler holds a
// delivery before its event (see holds), and last until that event's
// publish has failed; the fetch and offset commit faults last until they
// failed a request. The stream's publisher retries what fails with the
// same UUID; it holds back half the stream for the produce fault, and
// publishes into it until a publish has failed. The consumer is replaced
// by a new one in the same group after the restart.
// The test checks that the ledger has exactly one effect per distinct
// message, that nothing was dead-lettered, that the consumers resumed from
// the committed offsets rather than from the start, and that a Request
// while the broker is down, and while produce or fetch fail, ends promptly
// with an error, and works again once the fault is gone.
func TestBrokerFaults(t *testing.T) {
	n := fullOrShort(5000, 1500)
	b := kototest.Embedded(t, embedded.WithDataDir(t.TempDir()))
	base := broker.Config{
		Brokers:             b.Addrs(),
		NackResendSleep:     10 * time.Millisecond,
		ReconnectRetrySleep: 100 * time.Millisecond,
		// A request the broker dropped is given up after a second and
		// retried, rather than after sarama's default 30 s.
		Sarama: func(sc *sarama.Config) { sc.Net.ReadTimeout = time.Second },
	}
	stream, events := kototest.Topic(t, "faults-stream"), kototest.Topic(t, "faults-events")
	kototest.Provision(t, base, stream, events)

	pub := kototest.NewPublisher(t, base)
	var effects effectLedger
	var eventFailures atomic.Int64
	h := newTestHolds(t)
	store := idempotency.NewMemoryStore(0)
	t.Cleanup(func() { _ = store.Close() })
	cfg := base
	cfg.ConsumerGroup = kototest.Group(t, "faults")
	spec := routedSpec{cfg: cfg, topic: stream, store: store, effect: func(msg *message.Message) error {
		if err := h.wait(beforeEffect, "faults", msg); err != nil {
			return err
		}
		// The event per message: under a fault its publish fails, an
		// outage that the chain retries.
		ev := message.NewMessage(msg.UUID, msg.Payload)
		ctx, cancel := context.WithTimeout(msg.Context(), 2*time.Second)
		defer cancel()
		ev.SetContext(ctx)
		if err := pub.Publish(events, ev); err != nil {
			eventFailures.Add(1)
			return err
		}
		return effects.add(msg)
	}}
	c := startRouted(t, pub, spec)
	rr := newRequestReply(t, base)
	rr.request(t, "before the faults", true)

	sent := keyedMessages("fault", n)
	msgs := withRepublished(sent)
	// The handler holds a delivery before its effect, the event. Hold 0,
	// for the close, is in the third eighth of the stream; hold 1,
	// for the produce fault, in the first sixteenth of the half that the
	// publisher holds back, which it publishes once the first consumer has
	// stopped (see below).
	sixteenths := streamParts(len(msgs), 16)
	held := []int{markHold(msgs, sixteenths[4], sixteenths[6], 0), markHold(msgs, sixteenths[8], sixteenths[9], 1)}
	for _, i := range held {
		msgs[i].Metadata.Set(holdAtKey, string(beforeEffect))
	}
	// letGo opens hold k, whose delivery is held, and waits until an
	// event fails to publish under fault, as that delivery's will.
	letGo := func(k int, fault string) {
		t.Helper()
		failed := eventFailures.Load()
		h.openTo(k + 1)
		kototest.WaitFor(t, "an event to fail to publish under "+fault, func() bool { return eventFailures.Load() > failed })
	}
	// The publisher keeps at most a few hundred messages ahead of the
	// consumers, so that the stream goes on through every fault. It stops
	// at limit, half the stream, until the produce fault, so that it has
	// messages left to publish into it; push lets it run ahead of the
	// consumers, which that fault holds up too.
	var limit atomic.Int64
	limit.Store(int64(len(msgs) / 2))
	var push atomic.Bool
	p := startRetryingStream(t, pub, stream, msgs, func(i int) bool {
		return int64(i) < limit.Load() && (push.Load() || effects.Distinct() >= i*5/6-200)
	})

	// Fault 1: the broker closes mid-stream, with a delivery held, and
	// comes back on its data.
	h.waitHeld(t, 0, "faults")
	kototest.WaitFor(t, "a first offset commit", func() bool { return kototest.Committed(t, base.Brokers, cfg.ConsumerGroup, stream) > 0 })
	committed := kototest.Committed(t, base.Brokers, cfg.ConsumerGroup, stream)
	if err := b.Close(); err != nil {
		t.Fatalf("close the broker: %v", err)
	}
	rr.request(t, "while the broker is down", false)
	letGo(0, "the broker's close")
	ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
	defer cancel()
	if err := b.Restart(ctx); err != nil {
		t.Fatalf("restart the broker: %v", err)
	}
	if after := kototest.Committed(t, base.Brokers, cfg.ConsumerGroup, stream); after < committed {
		t.Fatalf("after the restart the group's committed offsets add up to %d, less than the %d committed before", after, committed)
	}
	// The consumer goes on where it was; then a new one (a redeploy,
	// with the same store) takes over the group from its committed offsets.
	waitEffects(t, &effects, n/3, "a third of the stream after the restart")
	c.stop()
	handover := kototest.Committed(t, base.Brokers, cfg.ConsumerGroup, stream)
	c2 := startRouted(t, pub, spec)

	// Faults 2 to 4: the restarted broker answers every produce, then every
	// fetch, then every offset commit with a retriable error, until the
	// fault has failed a request; the produce fault begins while the new
	// consumer holds a delivery, and lasts until the stream's publisher and
	// that delivery's event have failed. Produce fails on the stream, event and command topics only: the
	// dead-letter topics keep working, so that an outage taken for poison
	// would be dead-lettered and show.
	produce := func(topic string) kfake.Fault {
		return kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.NotEnoughReplicas, Count: -1}
	}
	faults := []struct {
		name      string
		faults    []kfake.Fault
		request   bool // whether a Request must fail under the fault
		publisher bool // whether a publish of the stream must fail under it
	}{
		{"produce", []kfake.Fault{produce(stream), produce(events), produce(rr.commands)}, true, true},
		{"fetch", []kfake.Fault{{Keys: []kmsg.Key{kmsg.Fetch}, Err: kerr.NotLeaderForPartition, Count: -1}}, true, false},
		{"offset commit", []kfake.Fault{{Keys: []kmsg.Key{kmsg.OffsetCommit}, Err: kerr.CoordinatorNotAvailable, Count: -1}}, false, false},
	}
	var hits []string
	for i, f := range faults {
		if f.publisher {
			limit.Store(int64(held[1] + 1))
			h.waitHeld(t, 1, "faults")
		} else {
			waitEffects(t, &effects, n*(i+2)/6, "more of the stream before the "+f.name+" fault")
		}
		failed := p.failures.Load()
		fault := b.Cluster().Fault(f.faults...)
		if f.request {
			rr.request(t, "while every "+f.name+" fails", false)
		}
		if f.publisher {
			// The publisher waits at limit, or for the consumers: it goes
			// on until the fault fails a publish, which it then retries.
			limit.Store(int64(len(msgs)))
			push.Store(true)
			kototest.WaitFor(t, "a publish of the stream failed by the "+f.name+" fault", func() bool { return p.failures.Load() > failed })
			push.Store(false)
			letGo(1, "the "+f.name+" fault")
		}
		kototest.WaitFor(t, "the "+f.name+" fault to fail a request", func() bool { return fault.Hits() > 0 })
		fault.Remove()
		hits = append(hits, fmt.Sprintf("%s %d", f.name, fault.Hits()))
	}

	p.wait(t)
	records := kototest.Records(t, base.Brokers, stream)
	c2.waitDone(t, records-c.done.Load(), faultLimit, "the stream after the faults")
	kototest.WaitCommitted(t, base.Brokers, cfg.ConsumerGroup, stream, records)
	rr.request(t, "after the faults", true)
	c2.stop()

	dups, losses := effects.tally(sent)
	redelivered := c.done.Load() + c2.done.Load() - records
	record(t, row{
		Checks:     "one effect per message, no dead letter, resume from committed offsets, Request fails fast under faults and works after",
		Faults:     "broker closed and restarted on its data; produce (stream, event, command topics), fetch, offset commit failed, each until it failed requests (close and produce: a held delivery's event)",
		Messages:   n,
		Duplicates: dups,
		Losses:     losses,
		Note: fmt.Sprintf("%d failed publishes retried; %d deliveries again (%d offsets committed before the restart, %d at the handover to a new consumer); faulted requests: %s; Request under faults ended in %s",
			p.failures.Load(), redelivered, committed, handover, strings.Join(hits, ", "), rr.slowest),
	})
	if dups != 0 || losses != 0 {
		t.Errorf("ledger: %d duplicate effects and %d messages without an effect, want none", dups, losses)
	}
	if p.failures.Load() == 0 {
		t.Error("no publish failed: the faults did not reach the publisher")
	}
	if redelivered >= committed {
		t.Errorf("%d deliveries beyond the topic's %d records, at least the %d offsets committed before the restart: the consumers started again from the beginning",
			redelivered, records, committed)
	}
	for _, group := range []string{cfg.ConsumerGroup, rr.group} {
		if dl := kototest.Records(t, base.Brokers, topics.DeadLetter(group)); dl != 0 {
			t.Errorf("%d dead letters on %s, want none: an outage is retried, never dead-lettered", dl, topics.DeadLetter(group))
		}
	}
}

// waitEffects waits until the ledger holds n distinct effects.
func waitEffects(t testing.TB, l *effectLedger, n int, what string) {
	t.Helper()
	kototest.WaitFor(t, what, func() bool { return l.Distinct() >= n })
}

// retryingStream publishes a stream in the background as an application
// would: a message whose publish fails is published again, with the same
// UUID, until it succeeds.
type retryingStream struct {
	failures atomic.Int64
	done     chan struct{}
	err      error
}

// startRetryingStream publishes msgs to topic one at a time, each within two
// seconds, in order, retrying failures, until all are published or the
// test ends. It publishes message i once may(i) holds.
func startRetryingStream(t testing.TB, pub message.Publisher, topic string, msgs []*message.Message, may func(i int) bool) *retryingStream {
	t.Helper()
	p := &retryingStream{done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	t.Cleanup(func() { cancel(); once.Do(func() { <-p.done }) })
	go func() {
		defer close(p.done)
		for i := 0; i < len(msgs); {
			if !may(i) {
				select {
				case <-ctx.Done():
					p.err = ctx.Err()
					return
				case <-time.After(5 * time.Millisecond):
				}
				continue
			}
			m := kototest.Republish(msgs[i])
			mctx, mcancel := context.WithTimeout(ctx, 2*time.Second)
			m.SetContext(mctx)
			err := pub.Publish(topic, m)
			mcancel()
			switch {
			case ctx.Err() != nil:
				p.err = ctx.Err()
				return
			case err != nil:
				p.failures.Add(1)
				time.Sleep(20 * time.Millisecond)
			default:
				i++
			}
		}
	}()
	return p
}

// wait waits until every message is published.
func (p *retryingStream) wait(t testing.TB) {
	t.Helper()
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("retryingStream stopped: %v", p.err)
		}
	case <-time.After(faultLimit):
		t.Fatalf("retryingStream did not finish within %v; %d publishes failed", faultLimit, p.failures.Load())
	}
}

// requestReply is a dispatcher and the service that answers its
// reserveStock commands, each on a router of its own.
type requestReply struct {
	d        *cqrs.CommandDispatcher
	commands string        // the command topic
	group    string        // the command consumer's group
	slowest  time.Duration // the longest a Request under a fault took
	seq      int
}

func newRequestReply(t *testing.T, base broker.Config) *requestReply {
	t.Helper()
	inventory, orders := kototest.ServiceName(t, "inventory"), kototest.ServiceName(t, "orders")
	name := topics.TypeName(reserveStock{})
	rr := &requestReply{commands: topics.Command(inventory, name), group: topics.ConsumerGroup(inventory, name)}
	// The services log every fault they ride out, on purpose; the test
	// checks what they did instead.
	logger := slog.New(slog.DiscardHandler)
	svc, err := cqrs.NewService(cqrs.ServiceConfig{Name: inventory, Broker: base, AutoProvisionTopics: true, Logger: logger})
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	t.Cleanup(func() { _ = svc.Close(kototest.Context(t)) })
	r := kototest.NewRouter(t, nil)
	if err := svc.Register(kototest.Context(t), r, reserveConsumer()); err != nil {
		t.Fatalf("Register: %v", err)
	}
	kototest.RunRouter(t, r)
	rr.d = startDispatcher(t)(cqrs.NewCommandDispatcher(kototest.NewPublisher(t, base), cqrs.CommandDispatcherConfig{
		Service: orders, Routes: reserveRoutes(inventory),
		Timeout: requestTimeout, Broker: base, AutoProvisionTopics: true, Logger: logger,
	}))
	return rr
}

// request sends a Request when. With ok, it retries until one gets its
// reply, within kototest.DefaultTimeout; without, the Request must end with an
// error within requestHang.
func (rr *requestReply) request(t testing.TB, when string, ok bool) {
	t.Helper()
	deadline := time.Now().Add(kototest.DefaultTimeout)
	for {
		rr.seq++
		sku := fmt.Sprintf("sku-%d", rr.seq)
		start := time.Now()
		res := make(chan error, 1)
		go func() {
			got, err := cqrs.Request[stockReserved](context.Background(), rr.d, reserveStock{SKU: sku})
			if err == nil && got.SKU != sku {
				err = fmt.Errorf("got the reply to %s", got.SKU)
			}
			res <- err
		}()
		var err error
		select {
		case err = <-res:
		case <-time.After(requestHang):
			t.Fatalf("Request %s hangs: no answer and no error within %v (Timeout %v)", when, requestHang, requestTimeout)
		}
		took := time.Since(start)
		switch {
		case !ok && err == nil:
			t.Fatalf("Request %s succeeded, want an error", when)
		case !ok:
			t.Logf("Request %s: %v after %v", when, err, took.Round(time.Millisecond))
			rr.slowest = max(rr.slowest, took.Round(time.Millisecond))
			return
		case err == nil:
			return
		case time.Now().After(deadline):
			t.Fatalf("no Request %s got its reply within %v; the last failed with %v", when, kototest.DefaultTimeout, err)
		case errors.Is(err, cqrs.ErrClosed):
			t.Fatalf("Request %s: %v", when, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
