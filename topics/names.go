package topics

// Event returns the topic an event type of a service is published to:
// Event("orders", "order-placed") == "orders.order-placed".
func Event(service, eventType string) string {
	return service + "." + eventType
}

// Command returns the topic a service that handles a command type reads it
// from: Command("inventory", "reserve-stock") == "inventory.reserve-stock".
// The service is the handling one, not the sender.
func Command(service, commandType string) string {
	return service + "." + commandType
}

// ConsumerGroup returns the consumer group of a service that consumes an
// event type: ConsumerGroup("payments", "order-placed") ==
// "payments.order-placed-consumer".
func ConsumerGroup(service, eventType string) string {
	return service + "." + eventType + "-consumer"
}

// DeadLetter returns the dead-letter topic of a consumer group:
// DeadLetter("payments.order-placed-consumer") ==
// "payments.order-placed-consumer.dlq".
func DeadLetter(consumerGroup string) string {
	return consumerGroup + ".dlq"
}
