package cqrs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// ChargeCardCommand asks payments to charge a card.
type ChargeCardCommand struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
	Fail   string `json:"fail,omitempty"`
}

// CardCharged is the result of ChargeCardCommand.
type CardCharged struct {
	ID          string `json:"id"`
	Correlation string `json:"correlation"` // as the handler saw it
}

// StallCommand is handled by a handler that does not answer until told.
type StallCommand struct {
	ID string `json:"id"`
}

var ErrCardDeclined = &cqrs.HandlerError{Kind: "card-declined", Message: "card declined"}

// reqReplyEnv is a payments service with command consumers and an orders
// service that sends them requests.
type reqReplyEnv struct {
	brokers  []string
	pub      message.Publisher
	orders   string
	payments string
	routes   []cqrs.Route
	released chan struct{} // closes to let StallCommand handlers return
	stalled  chan string   // StallCommand IDs as their handler starts
}

func newReqReplyEnv(t *testing.T) *reqReplyEnv {
	t.Helper()
	return newReqReplyEnvOn(t, kototest.Brokers(t))
}

// newReqReplyEnvOn is newReqReplyEnv on the given brokers.
func newReqReplyEnvOn(t *testing.T, brokers []string) *reqReplyEnv {
	t.Helper()
	payments := kototest.ServiceName(t, "payments")
	e := &reqReplyEnv{
		brokers:  brokers,
		pub:      kototest.NewPublisher(t, broker.Config{Brokers: brokers}),
		orders:   kototest.ServiceName(t, "orders"),
		payments: payments,
		released: make(chan struct{}),
		stalled:  make(chan string, 16),
		routes: []cqrs.Route{
			cqrs.RouteOf[ChargeCardCommand](topics.Command(payments, "charge-card")),
			cqrs.RouteOf[StallCommand](topics.Command(payments, "stall")),
		},
	}
	svc := newService(t, brokers, cqrs.ServiceConfig{Name: payments, AutoProvisionTopics: true})
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err := svc.Register(kototest.Context(t), r,
		cqrs.NewCommandConsumerWithResult(func(ctx context.Context, cmd *ChargeCardCommand) (CardCharged, error) {
			switch cmd.Fail {
			case "declined":
				return CardCharged{}, fmt.Errorf("card of %s: %w", cmd.ID, ErrCardDeclined)
			case "plain":
				return CardCharged{}, errors.New("ledger unavailable")
			case "panic":
				panic("card reader on fire")
			}
			return CardCharged{ID: cmd.ID, Correlation: correlation.FromContext(ctx)}, nil
		}),
		cqrs.NewCommandConsumer(func(ctx context.Context, cmd *StallCommand) error {
			e.stalled <- cmd.ID
			<-e.released
			return nil
		}),
	)
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	kototest.RunRouter(t, r)
	// Registered after runRouter, so it runs before the router closes.
	t.Cleanup(e.release)
	return e
}

var releaseMu sync.Mutex

func (e *reqReplyEnv) release() {
	releaseMu.Lock()
	defer releaseMu.Unlock()
	select {
	case <-e.released:
	default:
		close(e.released)
	}
}

func (e *reqReplyEnv) dispatcher(t *testing.T, timeout time.Duration) *cqrs.CommandDispatcher {
	t.Helper()
	return newDispatcher(t, e.pub, e.brokers, cqrs.CommandDispatcherConfig{
		Service: e.orders, Routes: e.routes, Timeout: timeout, AutoProvisionTopics: true,
	})
}

// requestMany sends n ChargeCard requests at once, alternating between the
// dispatchers, and checks that each gets the reply to its own command.
func requestMany(t *testing.T, n int, dispatchers ...*cqrs.CommandDispatcher) {
	t.Helper()
	ctx := kototest.Context(t)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("c-%d", i)
			got, err := cqrs.Request[CardCharged](ctx, dispatchers[i%len(dispatchers)], ChargeCardCommand{ID: id, Amount: i})
			switch {
			case err != nil:
				errs <- fmt.Errorf("request %s: %w", id, err)
			case got.ID != id:
				errs <- fmt.Errorf("request %s got the reply to %q", id, got.ID)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRequestReply(t *testing.T) {
	e := newReqReplyEnv(t)
	d1 := e.dispatcher(t, 0)
	d2 := e.dispatcher(t, 0)

	t.Run("ConcurrentRequestsFromTwoInstances", func(t *testing.T) {
		requestMany(t, 200, d1, d2)
	})

	t.Run("HandlerErrorKeepsMessageAndKind", func(t *testing.T) {
		ctx := kototest.Context(t)
		_, err := cqrs.Request[CardCharged](ctx, d1, ChargeCardCommand{ID: "c-declined", Fail: "declined"})
		if !errors.Is(err, ErrCardDeclined) {
			t.Fatalf("err = %v, want one that matches ErrCardDeclined", err)
		}
		var he *cqrs.HandlerError
		if !errors.As(err, &he) {
			t.Fatalf("err = %v, want a *cqrs.HandlerError", err)
		}
		if he.Kind != "card-declined" || he.Message != "card of c-declined: card declined" {
			t.Errorf("HandlerError = %+v, want kind card-declined and the handler's message", he)
		}
		if errors.Is(err, cqrs.ErrTimeout) {
			t.Errorf("a handler error matches ErrTimeout: %v", err)
		}

		_, err = cqrs.Request[CardCharged](ctx, d2, ChargeCardCommand{ID: "c-plain", Fail: "plain"})
		if !errors.As(err, &he) || he.Kind != cqrs.KindInternal || he.Message != "ledger unavailable" {
			t.Fatalf("err = %v (%+v), want kind %q with message %q", err, he, cqrs.KindInternal, "ledger unavailable")
		}
	})

	t.Run("CorrelationReachesTheHandler", func(t *testing.T) {
		ctx := correlation.WithID(kototest.Context(t), "corr-request")
		got, err := cqrs.Request[CardCharged](ctx, d2, ChargeCardCommand{ID: "c-corr"})
		if err != nil || got.Correlation != "corr-request" {
			t.Fatalf("Request = %+v, %v; want the handler to see corr-request", got, err)
		}
	})

	t.Run("PanicIsRepliedAndDeadLettered", func(t *testing.T) {
		dlq := deadLetters(t, e.brokers, topics.DeadLetter(topics.ConsumerGroup(e.payments, "charge-card")))
		_, err := cqrs.Request[CardCharged](kototest.Context(t), d1, ChargeCardCommand{ID: "c-panic", Fail: "panic"})
		var he *cqrs.HandlerError
		if !errors.As(err, &he) || he.Kind != cqrs.KindInternal || !strings.Contains(he.Message, "card reader on fire") {
			t.Fatalf("err = %v, want a %s HandlerError with the panic value", err, cqrs.KindInternal)
		}
		dead := kototest.Receive(t, dlq, "the dead-lettered command")
		if !strings.Contains(string(dead.Payload), "c-panic") {
			t.Errorf("dead letter %s, want the panicking command", dead.Payload)
		}
		// The partition moved on.
		requestMany(t, 3, d1)
	})

	t.Run("ResultlessCommand", func(t *testing.T) {
		// Fire-and-forget consumers answer requests too; struct{} waits
		// for the outcome only. The released stall handler answers at once.
		e.release()
		if _, err := cqrs.Request[struct{}](kototest.Context(t), d1, StallCommand{ID: "s-released"}); err != nil {
			t.Fatalf("Request: %v", err)
		}
	})
}

func TestRequestTimeout(t *testing.T) {
	e := newReqReplyEnv(t)
	d := e.dispatcher(t, 300*time.Millisecond)

	// The dispatcher's timeout, for a context without a deadline.
	ctx := correlation.WithID(context.Background(), "late-reply")
	_, err := cqrs.Request[struct{}](ctx, d, StallCommand{ID: "s-1"})
	if !errors.Is(err, cqrs.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrTimeout and context.DeadlineExceeded", err)
	}
	if got := kototest.Receive(t, e.stalled, "the stalled handler"); got != "s-1" {
		t.Fatalf("stalled %q, want s-1", got)
	}

	// A context deadline overrides the dispatcher's timeout, longer or
	// shorter. The stalled handler holds its partition, so this request may
	// or may not reach a handler; either way it times out.
	long := e.dispatcher(t, time.Hour)
	dctx, cancel := context.WithTimeout(kototest.Context(t), 200*time.Millisecond)
	defer cancel()
	_, err = cqrs.Request[struct{}](dctx, long, StallCommand{ID: "s-2"})
	if !errors.Is(err, cqrs.ErrTimeout) {
		t.Fatalf("with a context deadline: err = %v, want ErrTimeout", err)
	}

	// A cancelled context is not a timeout.
	cctx, cancelNow := context.WithCancel(kototest.Context(t))
	cancelNow()
	_, err = cqrs.Request[struct{}](cctx, d, StallCommand{ID: "s-3"})
	if !errors.Is(err, context.Canceled) || errors.Is(err, cqrs.ErrTimeout) {
		t.Fatalf("cancelled: err = %v, want context.Canceled and not ErrTimeout", err)
	}

	// Let the stalled handlers answer: their replies come late and are
	// dropped. Watch the reply topic to know that they were sent.
	late := watchReplies(t, e.brokers, cqrs.ReplyTopic(e.orders), "late-reply")
	e.release()
	kototest.Receive(t, late, "the late reply on the reply topic")

	// Later requests get their own replies. (Not through d: its 300 ms
	// Timeout bounds every request, and a loaded machine may need more.)
	requestMany(t, 20, long)
}

// watchReplies reads topic from its start and signals each message whose
// correlation ID is corrID.
func watchReplies(t *testing.T, brokers []string, topic, corrID string) <-chan struct{} {
	t.Helper()
	found := make(chan struct{}, 8)
	kototest.Watch(t, brokers, topic, func(msg *message.Message) {
		if correlation.FromMessage(msg) == corrID {
			select {
			case found <- struct{}{}:
			default:
			}
		}
	})
	return found
}

// TestDispatcherLifecycle checks the errors of Request and Start before
// Start, after Start and after Close.
func TestDispatcherLifecycle(t *testing.T) {
	brokers := kototest.Brokers(t)
	pub := kototest.NewPublisher(t, broker.Config{Brokers: brokers})
	d, err := cqrs.NewCommandDispatcher(pub, cqrs.CommandDispatcherConfig{
		Service: kototest.ServiceName(t, "orders"), AutoProvisionTopics: true,
		Routes: []cqrs.Route{cqrs.RouteOf[ChargeCardCommand]("payments.charge-card")},
		Broker: broker.Config{Brokers: brokers},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cqrs.Request[CardCharged](context.Background(), d, ChargeCardCommand{}); !errors.Is(err, cqrs.ErrNotStarted) {
		t.Errorf("before Start: %v, want ErrNotStarted", err)
	}
	if err := d.Err(); !errors.Is(err, cqrs.ErrNotStarted) {
		t.Errorf("Err before Start: %v, want ErrNotStarted", err)
	}
	if err := d.Start(kototest.Context(t)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := d.Start(kototest.Context(t)); err == nil || err.Error() != "cqrs: command dispatcher already started" {
		t.Errorf("second Start: %v, want already started", err)
	}
	if err := d.Err(); err != nil {
		t.Errorf("Err of a started dispatcher: %v, want nil", err)
	}
	err = d.Send(context.Background(), StallCommand{})
	if !errors.Is(err, cqrs.ErrNoRoute) || !strings.Contains(err.Error(), "stall") {
		t.Errorf("Send of an unrouted command: %v, want ErrNoRoute naming stall", err)
	}
	err = d.Send(context.Background(), struct{ A int }{1})
	if err == nil || errors.Is(err, cqrs.ErrNoRoute) || !strings.Contains(err.Error(), "has no type name") {
		t.Errorf("Send of an unnamed type: %v, want that it has no type name", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cqrs.Request[CardCharged](context.Background(), d, ChargeCardCommand{}); !errors.Is(err, cqrs.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	if err := d.Send(context.Background(), ChargeCardCommand{}); !errors.Is(err, cqrs.ErrClosed) {
		t.Errorf("Send after Close: %v, want ErrClosed", err)
	} else if class := koto.ClassOf(err); class != koto.ClassOutage {
		t.Errorf("Send after Close: %v classifies as %v, want an outage: a handler stopping with its service is nacked, not dead-lettered", err, class)
	}
	if err := d.Err(); !errors.Is(err, cqrs.ErrClosed) {
		t.Errorf("Err after Close: %v, want ErrClosed", err)
	}
	if err := d.Start(context.Background()); !errors.Is(err, cqrs.ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
}

// TestReplyPublishFailure makes the reply publish fail: it is retried on
// its own, without running the handler again, and when the message's
// context ends first the command is nacked as an outage.
func TestReplyPublishFailure(t *testing.T) {
	brokers := kototest.Brokers(t)
	payments := kototest.ServiceName(t, "payments")
	pub := kototest.NewPublisher(t, broker.Config{Brokers: brokers})
	flaky := &kototest.FlakyPublisher{Publisher: pub}
	var nacked <-chan error
	c, r := chargeService(t, brokers, cqrs.ServiceConfig{Name: payments, Publisher: flaky, AutoProvisionTopics: true},
		func(r *message.Router) { nacked = nackedErrors(r) })
	d := newDispatcher(t, pub, brokers, cqrs.CommandDispatcherConfig{
		Service: kototest.ServiceName(t, "orders"), AutoProvisionTopics: true,
		Routes: []cqrs.Route{cqrs.RouteOf[ChargeCardCommand](topics.Command(payments, "charge-card"))},
	})

	// Two failed publishes, then the reply goes out.
	flaky.FailFor(2)
	got, err := cqrs.Request[CardCharged](kototest.Context(t), d, ChargeCardCommand{ID: "c-flaky"})
	if err != nil || got.ID != "c-flaky" {
		t.Fatalf("Request = %+v, %v; want the reply to c-flaky", got, err)
	}
	if n, f := c.Get("c-flaky"), flaky.Failed(); n != 1 || f != 2 {
		t.Errorf("handler ran %d times over %d failed reply publishes, want once over 2", n, f)
	}

	// The broker refuses the reply for good: the command is dead-lettered
	// at once, and the handler is not run again.
	dlq := deadLetters(t, brokers, topics.DeadLetter(topics.ConsumerGroup(payments, "charge-card")))
	flaky.FailWith(1, sarama.ErrMessageSizeTooLarge)
	bigCtx, bigCancel := context.WithTimeout(kototest.Context(t), 200*time.Millisecond)
	defer bigCancel()
	if _, err := cqrs.Request[CardCharged](bigCtx, d, ChargeCardCommand{ID: "c-big"}); !errors.Is(err, cqrs.ErrTimeout) {
		t.Fatalf("Request whose reply is refused: %v, want ErrTimeout", err)
	}
	if dead := kototest.Receive(t, dlq, "the command whose reply was refused"); !strings.Contains(string(dead.Payload), "c-big") {
		t.Errorf("dead letter %s, want c-big", dead.Payload)
	}
	if n := c.Get("c-big"); n != 1 {
		t.Errorf("handler ran %d times for c-big, want once", n)
	}

	// The reply cannot go out; the router closes while it is retried.
	flaky.FailFor(1 << 30)
	ctx, cancel := context.WithTimeout(kototest.Context(t), 200*time.Millisecond)
	defer cancel()
	if _, err := cqrs.Request[CardCharged](ctx, d, ChargeCardCommand{ID: "c-down"}); !errors.Is(err, cqrs.ErrTimeout) {
		t.Fatalf("Request with the reply publisher down: %v, want ErrTimeout", err)
	}
	for kototest.Receive(t, c.handled, "the handler") != "c-down" {
	}
	for wait := kototest.Context(t); flaky.Failed() < 2; time.Sleep(time.Millisecond) { // until the reply is being retried
		if wait.Err() != nil {
			t.Fatal("the reply publish was not retried")
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	err = kototest.Receive(t, nacked, "the error of the unanswered command")
	if !errors.Is(err, kototest.ErrPublishDown) || koto.ClassOf(err) != koto.ClassOutage {
		t.Errorf("chain error %v (%s), want an outage wrapping the publish error", err, koto.ClassOf(err))
	}
	if n := c.Get("c-down"); n != 1 {
		t.Errorf("handler ran %d times for c-down, want once", n)
	}
}

// chargeService runs a service of cfg whose ChargeCardCommand consumer
// replies with the command's ID and counts the commands it handles. more,
// if not nil, changes the router before it runs.
func chargeService(t *testing.T, brokers []string, cfg cqrs.ServiceConfig, more func(*message.Router)) (*counter, *message.Router) {
	t.Helper()
	svc := newService(t, brokers, cfg)
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	if more != nil {
		more(r)
	}
	c := newCounter()
	err := svc.Register(kototest.Context(t), r, cqrs.NewCommandConsumerWithResult(func(_ context.Context, cmd *ChargeCardCommand) (CardCharged, error) {
		c.add(cmd.ID)
		return CardCharged{ID: cmd.ID}, nil
	}))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	kototest.RunRouter(t, r)
	return c, r
}

// Unencodable cannot be encoded as JSON.
type Unencodable struct {
	C chan int `json:"c"`
}

// TestPublishFailuresAreClassified checks that Publish, Send and Request
// wrap the publisher's error, so an unreachable broker is an outage, while
// a message the broker refuses for good, or an encoding failure, is not.
func TestPublishFailuresAreClassified(t *testing.T) {
	brokers := kototest.Brokers(t)
	flaky := &kototest.FlakyPublisher{Publisher: kototest.NewPublisher(t, broker.Config{Brokers: brokers})}
	events, err := cqrs.NewEventPublisher(flaky, cqrs.EventPublisherConfig{Service: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	d := newDispatcher(t, flaky, brokers, cqrs.CommandDispatcherConfig{
		Service: kototest.ServiceName(t, "orders"), AutoProvisionTopics: true,
		Routes: []cqrs.Route{cqrs.RouteOf[ChargeCardCommand]("payments.charge-card")},
	})
	ctx := kototest.Context(t)
	calls := map[string]func() error{
		"Publish": func() error { return events.Publish(ctx, OrderPlacedEvent{OrderID: "o-1"}) },
		"Send":    func() error { return d.Send(ctx, ChargeCardCommand{ID: "c-1"}) },
		"Request": func() error { _, err := cqrs.Request[CardCharged](ctx, d, ChargeCardCommand{ID: "c-2"}); return err },
	}
	for name, call := range calls {
		flaky.FailFor(1)
		err := call()
		if !errors.Is(err, kototest.ErrPublishDown) || koto.ClassOf(err) != koto.ClassOutage {
			t.Errorf("%s with the broker down: %v (%s), want an outage wrapping the publisher's error", name, err, koto.ClassOf(err))
		}
	}
	flaky.FailWith(1, sarama.ErrMessageSizeTooLarge)
	if err := events.Publish(ctx, OrderPlacedEvent{OrderID: "o-2"}); err == nil || koto.ClassOf(err) == koto.ClassOutage {
		t.Errorf("Publish refused for good by the broker: %v (%s), want an error that is no outage", err, koto.ClassOf(err))
	}
	flaky.FailFor(0)
	err = events.Publish(ctx, Unencodable{})
	if err == nil || koto.ClassOf(err) == koto.ClassOutage {
		t.Errorf("Publish of an event that cannot be encoded: %v (%s), want an error that is no outage", err, koto.ClassOf(err))
	}
}

// TestNilMessagesAreRefused: a nil command or event fails the call with an
// error that says so, and nothing is sent.
func TestNilMessagesAreRefused(t *testing.T) {
	brokers := kototest.Brokers(t)
	pub := kototest.NewPublisher(t, broker.Config{Brokers: brokers})
	d := newDispatcher(t, pub, brokers, cqrs.CommandDispatcherConfig{
		Service: kototest.ServiceName(t, "orders"), AutoProvisionTopics: true,
	})
	events, err := cqrs.NewEventPublisher(pub, cqrs.EventPublisherConfig{Service: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := kototest.Context(t)
	calls := map[string]error{
		"Send":    d.Send(ctx, nil),
		"Publish": events.Publish(ctx, nil),
	}
	_, calls["Request"] = cqrs.Request[CardCharged](ctx, d, nil)
	for name, err := range calls {
		if err == nil || !strings.Contains(err.Error(), "nil") {
			t.Errorf("%s of nil: %v, want an error naming the nil message", name, err)
		}
	}
}

// TestRequestBeforeStartIsRetried: a handler whose Request finds the
// dispatcher not started yet is retried as in an outage, past the retries
// of a retryable error, and succeeds once the dispatcher has started.
func TestRequestBeforeStartIsRetried(t *testing.T) {
	e := newReqReplyEnv(t)
	d, err := cqrs.NewCommandDispatcher(e.pub, cqrs.CommandDispatcherConfig{
		Service: e.orders, Routes: e.routes, AutoProvisionTopics: true, Broker: broker.Config{Brokers: e.brokers},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if class := koto.ClassOf(cqrs.ErrNotStarted); class != koto.ClassOutage {
		t.Errorf("ErrNotStarted is %v, want %v", class, koto.ClassOutage)
	}

	shop := kototest.ServiceName(t, "shop")
	events, err := cqrs.NewEventPublisher(e.pub, cqrs.EventPublisherConfig{Service: shop})
	if err != nil {
		t.Fatal(err)
	}
	failedPastRetries := make(chan int, 1)
	charged := make(chan string, 1)
	var failures int
	const maxAttempts = 3 // what a retryable error gets
	svc := newService(t, e.brokers, cqrs.ServiceConfig{Name: e.orders, AutoProvisionTopics: true, DeadLetter: middleware.DeadLetterConfig{MaxAttempts: maxAttempts}})
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err = svc.Register(kototest.Context(t), r, cqrs.NewEventConsumer(func(ctx context.Context, ev *OrderPlacedEvent) error {
		got, err := cqrs.Request[CardCharged](ctx, d, ChargeCardCommand{ID: ev.OrderID})
		if err != nil {
			if failures++; failures == maxAttempts+1 {
				failedPastRetries <- failures
			}
			return err
		}
		charged <- got.ID
		return nil
	}, cqrs.From(shop)))
	if err != nil {
		t.Fatal(err)
	}
	kototest.RunRouter(t, r)
	if err := events.Publish(kototest.Context(t), OrderPlacedEvent{OrderID: "o-early"}); err != nil {
		t.Fatal(err)
	}
	kototest.Receive(t, failedPastRetries, "more failures of the unstarted dispatcher than a retryable error gets")
	if err := d.Start(kototest.Context(t)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if got := kototest.Receive(t, charged, "the reply once started"); got != "o-early" {
		t.Errorf("charged %q, want o-early", got)
	}
}

// TestHandlerErrorLogLevel: a request answered with a HandlerError of the
// handler's own kind is logged at info with its kind; a plain error, which
// the requester gets as internal, at warn.
func TestHandlerErrorLogLevel(t *testing.T) {
	brokers := kototest.Brokers(t)
	payments, orders := kototest.ServiceName(t, "payments"), kototest.ServiceName(t, "orders")
	var logs kototest.Buffer
	svc, err := cqrs.NewService(cqrs.ServiceConfig{
		Name: payments, Broker: broker.Config{Brokers: brokers}, AutoProvisionTopics: true,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, svc)
	r := kototest.NewRouter(t, kototest.Logger(slog.LevelError))
	err = svc.Register(kototest.Context(t), r, cqrs.NewCommandConsumerWithResult(func(_ context.Context, cmd *ChargeCardCommand) (CardCharged, error) {
		if cmd.Fail == "declined" {
			return CardCharged{}, fmt.Errorf("card of %s: %w", cmd.ID, ErrCardDeclined)
		}
		return CardCharged{}, errors.New("ledger unavailable")
	}))
	if err != nil {
		t.Fatal(err)
	}
	kototest.RunRouter(t, r)
	d := newDispatcher(t, kototest.NewPublisher(t, broker.Config{Brokers: brokers}), brokers, cqrs.CommandDispatcherConfig{
		Service: orders, AutoProvisionTopics: true, Routes: []cqrs.Route{cqrs.RouteOf[ChargeCardCommand](topics.Command(payments, "charge-card"))},
	})
	ctx := kototest.Context(t)
	if _, err := cqrs.Request[CardCharged](ctx, d, ChargeCardCommand{ID: "declined", Fail: "declined"}); !errors.Is(err, ErrCardDeclined) {
		t.Fatalf("declined: %v, want ErrCardDeclined", err)
	}
	if _, err := cqrs.Request[CardCharged](ctx, d, ChargeCardCommand{ID: "plain"}); err == nil {
		t.Fatal("plain error: the request succeeded")
	}

	lines := map[string]string{} // error → level and kind of its "command handled" line
	kototest.WaitFor(t, "both commands logged", func() bool {
		for line := range strings.Lines(logs.String()) {
			var l struct {
				Level, Msg, Error string
				ErrorKind         string `json:"error_kind"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "command handled" {
				lines[l.Error] = l.Level + " " + l.ErrorKind
			}
		}
		return len(lines) == 2
	})
	want := map[string]string{"card of declined: card declined": "INFO card-declined", "ledger unavailable": "WARN " + cqrs.KindInternal}
	if !maps.Equal(lines, want) {
		t.Errorf("command lines by error = %v, want %v", lines, want)
	}
}
