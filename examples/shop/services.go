package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/cqrs"
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

// payments charges each placed order once, however often it is delivered,
// and announces the payment.
func payments(log *slog.Logger, events *cqrs.EventPublisher, charged *atomic.Int64) cqrs.Consumer {
	return cqrs.NewEventConsumer(func(ctx context.Context, ev *OrderPlaced) error {
		charged.Add(1)
		log.InfoContext(ctx, "payments: charged", "order", ev.OrderID, "amount", ev.Total)
		return events.Publish(ctx, PaymentProcessed{OrderID: ev.OrderID, Amount: ev.Total})
	}, cqrs.From("orders"))
}

// paid is the orders service's consumer of PaymentProcessed: it reports
// each paid order on done.
func paid(log *slog.Logger, done chan<- string) cqrs.Consumer {
	return cqrs.NewEventConsumer(func(ctx context.Context, ev *PaymentProcessed) error {
		log.InfoContext(ctx, "orders: paid", "order", ev.OrderID)
		done <- fmt.Sprintf("order %s paid %d (correlation %s)", ev.OrderID, ev.Amount, correlation.FromContext(ctx))
		return nil
	}, cqrs.From("payments"))
}
