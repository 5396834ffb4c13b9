package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/outbox"
)

// errOutOfStock is the kind of error inventory answers for an unknown SKU.
var errOutOfStock = &cqrs.HandlerError{Kind: "out-of-stock", Message: "out of stock"}

// inventory answers ReserveStock requests.
func inventory(log *slog.Logger) cqrs.Consumer {
	var next atomic.Int64
	return cqrs.NewCommandConsumerWithResult(func(ctx context.Context, cmd *ReserveStock) (StockReserved, error) {
		if cmd.SKU == "unobtainium" {
			return StockReserved{}, fmt.Errorf("%s: %w", cmd.SKU, errOutOfStock)
		}
		id := fmt.Sprintf("res-%d", next.Add(1))
		log.InfoContext(ctx, "inventory: reserved", "sku", cmd.SKU, "reservation", id)
		return StockReserved{ReservationID: id}, nil
	})
}

// gatewayBusyFor is how long the card gateway asks a payment it is too
// busy for to wait.
const gatewayBusyFor = time.Second

// cardGateway is the payments service's flaky dependency: too busy for the
// first charge of the second order, it asks to be tried again in a second
// (koto.RetryAfter), and the payment is parked that long, its slot free,
// and charged when it comes back.
type cardGateway struct {
	mu    sync.Mutex
	tries map[string]int // charges asked, by order
	busy  atomic.Int64   // charges it was too busy for
}

// charge charges orderID, or says when to try again.
func (g *cardGateway) charge(orderID string, n int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tries == nil {
		g.tries = map[string]int{}
	}
	if g.tries[orderID]++; n == 2 && g.tries[orderID] == 1 {
		g.busy.Add(1)
		return koto.RetryAfter(fmt.Errorf("card gateway busy charging %s", orderID), gatewayBusyFor)
	}
	return nil
}

// payments charges each placed order once, however often it is delivered,
// and announces the payment. It runs in the transactional mode of the
// durable outbox: the ledger row and PaymentProcessed are written in the
// transaction that claims the message, and commit or roll back together.
// The order's key is locked first, so its events keep their commit order.
// A charge the card gateway is too busy for is parked, and its order's
// later events wait behind it.
func payments(log *slog.Logger, l ledger, events *cqrs.EventPublisher, gateway *cardGateway) cqrs.Consumer {
	return cqrs.NewEventConsumer(func(ctx context.Context, ev *OrderPlaced) error {
		tx, ok := postgres.TxFromContext(ctx)
		if !ok {
			return errors.New("payments: no transaction; register the consumer on the durable outbox's Service")
		}
		if err := gateway.charge(ev.OrderID, ev.Total/100); err != nil {
			return err
		}
		if err := l.charge(ctx, tx, ev.OrderID, ev.Total); err != nil {
			return err
		}
		log.InfoContext(ctx, "payments: charged", "order", ev.OrderID, "amount", ev.Total)
		return events.Publish(ctx, PaymentProcessed{OrderID: ev.OrderID, Amount: ev.Total})
	}, cqrs.From("orders"), cqrs.LockKeys(orderKey))
}

// orderKey is the order ID an OrderPlaced carries as its partition key.
func orderKey(msg *message.Message) ([]string, error) {
	return []string{msg.Metadata.Get(koto.PartitionKeyMetadataKey)}, nil
}

// paid is the orders service's consumer of PaymentProcessed, in the
// transactional mode: it marks the order paid and cancels its payment
// timeout in one transaction, and reports each paid order on done.
func paid(log *slog.Logger, l ledger, events *cqrs.EventPublisher, done chan<- string) cqrs.Consumer {
	return cqrs.NewEventConsumer(func(ctx context.Context, ev *PaymentProcessed) error {
		tx, ok := postgres.TxFromContext(ctx)
		if !ok {
			return errors.New("orders: no transaction; register the consumer on the durable outbox's Service")
		}
		timeout, placed, err := l.settle(ctx, tx, ev.OrderID, "paid")
		if err != nil || !placed {
			return err
		}
		note := "its payment timeout cancelled"
		switch err := events.Cancel(ctx, timeout); {
		case errors.Is(err, outbox.ErrSent):
			note = "too late: its payment timeout fired first"
		case err != nil:
			return err
		}
		log.InfoContext(ctx, "orders: paid", "order", ev.OrderID)
		done <- fmt.Sprintf("order %s paid %d (correlation %s), %s", ev.OrderID, ev.Amount, correlation.FromContext(ctx), note)
		return nil
	}, cqrs.From("payments"))
}

// timedOut is the orders service's consumer of its own PaymentTimedOut: an
// order still unpaid when its timeout fires expires.
func timedOut(log *slog.Logger, l ledger) cqrs.Consumer {
	return cqrs.NewEventConsumer(func(ctx context.Context, ev *PaymentTimedOut) error {
		tx, ok := postgres.TxFromContext(ctx)
		if !ok {
			return errors.New("orders: no transaction; register the consumer on the durable outbox's Service")
		}
		if _, expired, err := l.settle(ctx, tx, ev.OrderID, "expired"); err != nil || !expired {
			return err
		}
		log.InfoContext(ctx, "orders: payment timed out", "order", ev.OrderID)
		return nil
	}, cqrs.From("orders"))
}
