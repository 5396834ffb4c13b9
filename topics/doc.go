// Package topics holds the Kafka naming conventions of watermill-koto.
//
// Event topics are named {service}.{event-type}, consumer groups
// {consuming-service}.{event-type}-consumer and dead-letter topics
// {consumer-group}.dlq. Every function here is pure: no I/O, no state.
package topics
