// Package topics holds the Kafka naming conventions of watermill-koto.
//
// It is part of the vocabulary of the library's layers (README,
// Architecture): it talks to nothing.
//
// Event topics are named {service}.{event-type} after the publishing
// service, command topics {service}.{command-type} after the service that
// handles the command, consumer groups {consuming-service}.{type}-consumer
// and dead-letter topics {consumer-group}.dlq. Every function here is pure:
// no I/O, no state.
package topics
