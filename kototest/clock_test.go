package kototest_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/parking"
)

type Reminder struct {
	OrderID string `json:"orderId"`
}

// reminders is a service under test that consumes orders' Reminders,
// with parking, and calls handle for each; and orders' publisher of them.
type reminders struct {
	durable *cqrs.DurableOutbox
	orders  *cqrs.EventPublisher
}

func newReminders(t *testing.T, h *kototest.Harness, handle func(Reminder) error) *reminders {
	t.Helper()
	ctx := h.Context()
	durable, err := cqrs.NewDurableOutbox(ctx, h.Pool(), cqrs.DurableOutboxConfig{
		Broker: h.Broker(), Outbox: outbox.Config{Schema: h.Schema()}, Store: postgres.Config{Schema: h.Schema()},
		Parking: parking.Config{Schema: h.Schema()}, Logger: h.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Defer(func() { _ = durable.Close() })
	orders, err := durable.EventPublisher(cqrs.EventPublisherConfig{Service: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := durable.Service(cqrs.ServiceConfig{
		Name: "mail", Broker: h.Broker(), AutoProvisionTopics: true, Logger: h.Logger(),
		DeadLetter: middleware.DeadLetterConfig{MaxAttempts: 1, Parking: middleware.ParkingConfig{
			Delays: []time.Duration{time.Minute, 5 * time.Minute},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Defer(func() { _ = svc.Close(context.Background()) })
	err = svc.Register(ctx, h.Router(), cqrs.NewEventConsumer(func(_ context.Context, r *Reminder) error {
		return handle(*r)
	}, cqrs.From("orders")))
	if err != nil {
		t.Fatal(err)
	}
	return &reminders{durable: durable, orders: orders}
}

// remindAfter schedules a Reminder of order delay from now and returns
// the schedule's ID.
func (r *reminders) remindAfter(t *testing.T, h *kototest.Harness, delay time.Duration, order string) string {
	t.Helper()
	var id string
	err := r.durable.Outbox().Transact(h.Context(), func(ctx context.Context, _ pgx.Tx) (err error) {
		id, err = r.orders.PublishAfter(ctx, delay, Reminder{OrderID: order})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// cancel cancels the schedule id.
func (r *reminders) cancel(h *kototest.Harness, id string) error {
	return r.durable.Outbox().Transact(h.Context(), func(ctx context.Context, _ pgx.Tx) error {
		return r.orders.Cancel(ctx, id)
	})
}

// sent returns the OrderIDs of the Reminders handled so far.
func sent(h *kototest.Harness) []string {
	var ids []string
	for _, r := range kototest.Consumed[Reminder](h, kototest.Handled) {
		ids = append(ids, r.OrderID)
	}
	return ids
}

// TestAdvanceFiresScheduled: reminders scheduled an hour and two hours
// ahead are not sent until Advance has made that much time pass for them,
// in two steps for the first; one scheduled between those steps counts
// only the second; a Cancel after an Advance stops the one not
// due yet and says ErrSent for the one sent.
func TestAdvanceFiresScheduled(t *testing.T) {
	h := kototest.New(t)
	r := newReminders(t, h, func(Reminder) error { return nil })
	h.Run()
	hour := r.remindAfter(t, h, time.Hour, "o-1h")
	twoHours := r.remindAfter(t, h, 2*time.Hour, "o-2h")
	h.Wait()
	if got := sent(h); len(got) != 0 {
		t.Fatalf("sent %v before any Advance, want none", got)
	}
	h.Advance(30 * time.Minute)
	h.Wait()
	if got := sent(h); len(got) != 0 {
		t.Fatalf("sent %v after 30m, want none", got)
	}
	r.remindAfter(t, h, time.Hour, "o-late") // counts the Advances after it alone
	h.Advance(30 * time.Minute)
	h.Wait()
	if got := sent(h); !slices.Equal(got, []string{"o-1h"}) {
		t.Fatalf("sent %v after 1h, want o-1h's alone: 30m passed for o-late's", got)
	}
	if err := r.cancel(h, hour); !errors.Is(err, outbox.ErrSent) {
		t.Errorf("Cancel of the reminder sent = %v, want ErrSent", err)
	}
	if err := r.cancel(h, twoHours); err != nil {
		t.Errorf("Cancel of the reminder not due = %v, want nil", err)
	}
	h.Advance(2 * time.Hour)
	h.Wait()
	if got := sent(h); !slices.Equal(got, []string{"o-1h", "o-late"}) {
		t.Errorf("sent %v after 3h, want o-1h's and o-late's: o-2h's was cancelled", got)
	}
	h.NoDeadLetters()
}

// TestAdvanceRunsParkedAgain: a message whose handler asks to be tried
// again in 10 minutes (koto.RetryAfter) runs again once Advance has made
// 10 minutes pass, not before; one that keeps failing goes through the
// parking's delays, a minute then five, and is dead-lettered after them.
func TestAdvanceRunsParkedAgain(t *testing.T) {
	h := kototest.New(t)
	var mu sync.Mutex
	calls := map[string]int{}
	r := newReminders(t, h, func(rem Reminder) error {
		mu.Lock()
		defer mu.Unlock()
		calls[rem.OrderID]++
		switch {
		case rem.OrderID == "busy" && calls[rem.OrderID] == 1:
			return koto.RetryAfter(errors.New("mail server busy"), 10*time.Minute)
		case rem.OrderID == "broken":
			return errors.New("no such address")
		}
		return nil
	})
	count := func(order string) int {
		mu.Lock()
		defer mu.Unlock()
		return calls[order]
	}
	h.Run()
	r.remindAfter(t, h, 0, "busy")
	r.remindAfter(t, h, 0, "broken")
	h.Wait()
	if n := len(kototest.Consumed[Reminder](h, kototest.Parked)); n != 2 || count("busy") != 1 || count("broken") != 1 {
		t.Fatalf("%d parked, calls %v; want both parked after one call each", n, calls)
	}
	h.Advance(time.Minute) // broken's first parking
	h.Wait()
	if count("busy") != 1 || count("broken") != 2 {
		t.Fatalf("calls %v after 1m, want busy 1, broken 2", calls)
	}
	h.Advance(5 * time.Minute) // broken's second
	h.Wait()
	if dl := h.DeadLetters(); len(dl) != 1 || count("broken") != 3 {
		t.Fatalf("dead letters %v, calls %v after 6m; want broken dead-lettered after its third call", dl, calls)
	}
	if count("busy") != 1 {
		t.Fatalf("busy called %d times after 6m, want once: it asked for 10m", count("busy"))
	}
	h.Advance(4 * time.Minute)
	h.Wait()
	if got := sent(h); !slices.Equal(got, []string{"busy"}) || count("busy") != 2 {
		t.Errorf("sent %v, busy called %d times after 10m; want busy sent on its second call", got, count("busy"))
	}
	if st, err := r.durable.Parking().Status(h.Context()); err != nil || len(st) != 0 {
		t.Errorf("parked after all: %+v (%v), want nothing", st, err)
	}
}

// TestAdvanceFollowsParkedEntries: with no forwarder to move it, a parked
// message that Advance made due keeps pointing at its schedule, so that
// RunNow replaces that schedule rather than adding a second return.
func TestAdvanceFollowsParkedEntries(t *testing.T) {
	h := kototest.New(t)
	ctx := h.Context()
	box, err := outbox.New(h.Pool(), outbox.Config{Schema: h.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	store, err := parking.NewStore(h.Pool(), box, parking.Config{Schema: h.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(box.Setup(ctx), store.Setup(ctx)); err != nil {
		t.Fatal(err)
	}
	msg := message.NewMessage(watermill.NewUUID(), []byte(`{"orderId":"o-1"}`))
	p := &middleware.Parked{ID: watermill.NewUUID(), Group: "mail", Message: msg, Parkings: 1, DueAt: time.Now().Add(10 * time.Minute),
		Position: koto.Position{Topic: "orders.reminder", Partition: 0, Offset: 7, Key: []byte("o-1")}}
	if err := store.Park(ctx, p); err != nil {
		t.Fatal(err)
	}
	h.Advance(10 * time.Minute)
	entries, err := store.List(ctx, "mail", 10)
	if err != nil || len(entries) != 1 || entries[0].DueAt.After(time.Now()) {
		t.Fatalf("parked after the Advance: %+v (%v), want o-1's, due", entries, err)
	}
	if err := store.RunNow(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if st, err := box.Status(ctx); err != nil || st.Scheduled != 1 {
		t.Errorf("%d returns scheduled (%v), want 1: RunNow's, which replaced the one Advance made due", st.Scheduled, err)
	}
}
