package main

// OrderPlaced is the orders service's integration event: topic
// "orders.order-placed".
type OrderPlaced struct {
	OrderID string `json:"orderId"`
	SKU     string `json:"sku"`
	Total   int    `json:"total"`
}

// MessageID makes the event's message ID follow the order, so publishing the
// same order twice is a duplicate that consumers skip.
func (e OrderPlaced) MessageID() string { return "order-placed/" + e.OrderID }

// PartitionKey keeps one order's events in order on one partition.
func (e OrderPlaced) PartitionKey() string { return e.OrderID }

// PaymentProcessed is the payments service's integration event: topic
// "payments.payment-processed".
type PaymentProcessed struct {
	OrderID string `json:"orderId"`
	Amount  int    `json:"amount"`
}

// PartitionKey keeps one order's events in order on one partition.
func (e PaymentProcessed) PartitionKey() string { return e.OrderID }

// PaymentTimedOut is the orders service's own event, scheduled at checkout
// for paymentTimeout later and cancelled when the payment arrives: topic
// "orders.payment-timed-out".
type PaymentTimedOut struct {
	OrderID string `json:"orderId"`
}

// PartitionKey keeps one order's events in order on one partition.
func (e PaymentTimedOut) PartitionKey() string { return e.OrderID }

// ReserveStock is a command the inventory service handles and answers:
// topic "inventory.reserve-stock".
type ReserveStock struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// StockReserved is ReserveStock's reply.
type StockReserved struct {
	ReservationID string `json:"reservationId"`
}
