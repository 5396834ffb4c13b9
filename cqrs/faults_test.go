package cqrs_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

// These tests make the embedded broker misbehave with kfake's request
// control and faults, and check that request/reply keeps its promises.

// TestCallsEndAtTheirDeadlineWhileTheBrokerStallsTheProduce: the broker
// leaves every produce to the command and event topics unanswered (until
// sarama's read timeout, 30 s, gives up on it). Close ends a Request whose
// command is stalled; Request, Send and Publish end at their deadline with
// ErrTimeout, saying that the message was not sent.
func TestCallsEndAtTheirDeadlineWhileTheBrokerStallsTheProduce(t *testing.T) {
	kototest.VerifyNoLeaks(t)
	b := kototest.Embedded(t)
	brokers := b.Addrs()
	commands, events := topics.Command("payments", "charge-card"), topics.Event("orders", "order-placed")
	kototest.Provision(t, broker.Config{Brokers: brokers}, commands, events)
	cfg := cqrs.CommandDispatcherConfig{
		Service: "orders", AutoProvisionTopics: true,
		Routes: []cqrs.Route{cqrs.RouteOf[ChargeCardCommand](commands)},
	}
	closing := newDispatcher(t, retryingPublisher(t, brokers), brokers, cfg)
	pub := retryingPublisher(t, brokers) // a producer, and so a connection, of its own
	d := newDispatcher(t, pub, brokers, cfg)
	ev, err := cqrs.NewEventPublisher(pub, cqrs.EventPublisherConfig{Service: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	stall := kototest.StallRequests(t, b, kmsg.Produce, commands, events)

	pending := async(func() error {
		_, err := cqrs.Request[CardCharged](kototest.Context(t), closing, ChargeCardCommand{ID: "c-closed"})
		return err
	})
	kototest.Receive(t, stall.Stalled(), "the stalled produce of the pending request")
	if err := kototest.Receive(t, async(closing.Close), "result of Close with a request still sending"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := kototest.Receive(t, pending, "result of the request that Close ends"); !errors.Is(err, cqrs.ErrClosed) {
		t.Fatalf("request pending at Close: %v, want ErrClosed", err)
	} else if class := koto.ClassOf(err); class != koto.ClassOutage {
		t.Errorf("request pending at Close: %v classifies as %v, want an outage", err, class)
	}

	calls := []struct {
		name, stage string
		call        func(context.Context) error
	}{
		{"Request", "not sent", func(ctx context.Context) error {
			_, err := cqrs.Request[CardCharged](ctx, d, ChargeCardCommand{ID: "c-held"})
			return err
		}},
		{"Send", "not sent", func(ctx context.Context) error { return d.Send(ctx, ChargeCardCommand{ID: "c-sent"}) }},
		{"Publish", "not published", func(ctx context.Context) error { return ev.Publish(ctx, OrderPlacedEvent{OrderID: "o-1"}) }},
	}
	for _, c := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := kototest.Receive(t, async(func() error { return c.call(ctx) }), "result of "+c.name+" under a stalled produce")
		cancel()
		if !errors.Is(err, cqrs.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), c.stage) {
			t.Errorf("%s under a stalled produce: %v; want ErrTimeout and context.DeadlineExceeded, saying %q", c.name, err, c.stage)
		}
	}
	if stall.Count() < 2 {
		t.Errorf("the broker stalled %d produce requests, want one of each dispatcher", stall.Count())
	}
}

// TestStartBlocksNeitherRequestNorClose: the broker leaves the reply
// reader's offset lookup unanswered, so Start hangs. A Request meanwhile ends at its
// own deadline, without being sent; Close ends the Start.
func TestStartBlocksNeitherRequestNorClose(t *testing.T) {
	kototest.VerifyNoLeaks(t)
	b := kototest.Embedded(t)
	brokers := b.Addrs()
	replies := cqrs.ReplyTopic("orders")
	kototest.Provision(t, broker.Config{Brokers: brokers}, replies)
	d, err := cqrs.NewCommandDispatcher(kototest.NewPublisher(t, broker.Config{Brokers: brokers}), cqrs.CommandDispatcherConfig{
		Service: "orders", Broker: broker.Config{Brokers: brokers}, Logger: kototest.Logger(slog.LevelError),
		Routes: []cqrs.Route{cqrs.RouteOf[ChargeCardCommand](topics.Command("payments", "charge-card"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	stall := kototest.StallRequests(t, b, kmsg.ListOffsets, replies)
	started := async(func() error { return d.Start(context.Background()) })
	kototest.Receive(t, stall.Stalled(), "the reply reader's stalled offset lookup")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = kototest.Receive(t, async(func() error {
		_, err := cqrs.Request[CardCharged](ctx, d, ChargeCardCommand{ID: "c-early"})
		return err
	}), "result of a Request during Start")
	if !errors.Is(err, cqrs.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not sent") {
		t.Errorf("Request during Start: %v; want ErrTimeout and context.DeadlineExceeded, saying it was not sent", err)
	}
	select {
	case err := <-started:
		t.Fatalf("Start returned (%v) while its offset lookup was stalled", err)
	default:
	}

	if err := kototest.Receive(t, async(d.Close), "result of Close during Start"); err != nil {
		t.Fatalf("Close during Start: %v", err)
	}
	if err := kototest.Receive(t, started, "result of Start after Close"); !errors.Is(err, cqrs.ErrClosed) {
		t.Errorf("Start ended by Close: %v, want ErrClosed", err)
	}
}

// TestReplyReaderRecoversAfterBrokerRestartWithoutData: the broker
// restarts on the same address without its data, so the reply topic's
// offsets start again at 0. Requests succeed again on the same dispatcher.
func TestReplyReaderRecoversAfterBrokerRestartWithoutData(t *testing.T) {
	kototest.VerifyNoLeaks(t)
	b := kototest.Embedded(t)
	e := newReqReplyEnvOn(t, b.Addrs())
	d := e.dispatcher(t, 0)
	requestMany(t, 30, d)

	ctx, cancel := context.WithTimeout(context.Background(), 2*kototest.DefaultTimeout)
	defer cancel()
	if err := b.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		got, err := cqrs.Request[CardCharged](rctx, d, ChargeCardCommand{ID: "c-after"})
		rcancel()
		if err == nil && got.ID == "c-after" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no request succeeded within %s of the restart; the last failed with %v", 2*kototest.DefaultTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	requestMany(t, 10, d)
}

// TestReplyRetriedAfterProducerStateError: the broker rejects one reply
// with OUT_OF_ORDER_SEQUENCE_NUMBER, as after it lost the idempotent
// producer's state. The reply is published again, the request gets it, the
// handler ran once, and nothing is dead-lettered.
func TestReplyRetriedAfterProducerStateError(t *testing.T) {
	kototest.VerifyNoLeaks(t)
	b := kototest.Embedded(t)
	brokers := b.Addrs()
	c, _ := chargeService(t, brokers, cqrs.ServiceConfig{Name: "payments", AutoProvisionTopics: true}, nil)
	d := newDispatcher(t, kototest.NewPublisher(t, broker.Config{Brokers: brokers}), brokers, cqrs.CommandDispatcherConfig{
		Service: "orders", AutoProvisionTopics: true,
		Routes: []cqrs.Route{cqrs.RouteOf[ChargeCardCommand](topics.Command("payments", "charge-card"))},
	})
	if _, err := cqrs.Request[CardCharged](kototest.Context(t), d, ChargeCardCommand{ID: "c-warm"}); err != nil {
		t.Fatalf("first request: %v", err)
	}

	fault := b.Cluster().Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Produce}, Topic: cqrs.ReplyTopic("orders"), Err: kerr.OutOfOrderSequenceNumber, Count: 1,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := cqrs.Request[CardCharged](ctx, d, ChargeCardCommand{ID: "c-oos"})
	if err != nil || got.ID != "c-oos" {
		t.Fatalf("Request whose reply is rejected once: %+v, %v; want the reply to c-oos", got, err)
	}
	if fault.Hits() != 1 {
		t.Fatalf("the fault answered %d produce requests, want 1", fault.Hits())
	}
	if n := c.Get("c-oos"); n != 1 {
		t.Errorf("handler ran %d times, want once", n)
	}
	if n := kototest.Records(t, brokers, topics.DeadLetter(topics.ConsumerGroup("payments", "charge-card"))); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}
}

// async runs f on a goroutine of its own and returns its result.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// retryingPublisher is a broker publisher that gives up on an unanswered
// request after a second and retries it, so that Close does not wait
// sarama's default 30 s for a stalled produce.
func retryingPublisher(t *testing.T, brokers []string) message.Publisher {
	t.Helper()
	pub, err := broker.NewPublisher(broker.Config{Brokers: brokers, Sarama: func(sc *sarama.Config) {
		sc.Net.ReadTimeout = time.Second
	}})
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// TestRequestsFailFastWhileRepliesCannotBeRead: the reply topic is deleted
// and created again, and the broker refuses the offset lookups that the
// reply reader needs to resume it. Meanwhile a Request fails at once, with
// an error that wraps the cause and counts as an outage, and Err says so;
// once the broker answers again, requests succeed.
func TestRequestsFailFastWhileRepliesCannotBeRead(t *testing.T) {
	kototest.VerifyNoLeaks(t)
	b := kototest.Embedded(t)
	brokers := b.Addrs()
	e := newReqReplyEnvOn(t, brokers)
	d := newDispatcher(t, e.pub, brokers, cqrs.CommandDispatcherConfig{
		Service: e.orders, Routes: e.routes, AutoProvisionTopics: true,
		Broker: broker.Config{ReconnectRetrySleep: 20 * time.Millisecond},
	})
	requestMany(t, 9, d)

	replies := cqrs.ReplyTopic(e.orders)
	fault := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: replies, Count: -1})
	ctx := kototest.Context(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if resp, err := kadm.NewClient(cl).DeleteTopics(ctx, replies); err != nil || resp.Error() != nil {
		t.Fatalf("delete %s: %v, %v", replies, err, resp.Error())
	}
	kototest.Provision(t, broker.Config{Brokers: brokers}, replies)
	for d.Err() == nil {
		if ctx.Err() != nil {
			t.Fatal("the dispatcher never reported that it cannot read replies")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := d.Err(); !errors.Is(err, broker.ErrReaderDown) || !errors.Is(err, sarama.ErrOffsetOutOfRange) {
		t.Errorf("Err: %v, want broker.ErrReaderDown and sarama.ErrOffsetOutOfRange", err)
	}
	_, err = cqrs.Request[CardCharged](ctx, d, ChargeCardCommand{ID: "c-down"})
	if !errors.Is(err, broker.ErrReaderDown) || errors.Is(err, cqrs.ErrTimeout) || koto.ClassOf(err) != koto.ClassOutage {
		t.Errorf("Request while replies cannot be read: %v (%s); want an outage that wraps broker.ErrReaderDown, not a timeout",
			err, koto.ClassOf(err))
	}

	fault.Remove()
	for d.Err() != nil {
		if ctx.Err() != nil {
			t.Fatalf("the reply reader never recovered: %v", d.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	requestMany(t, 9, d)
}
