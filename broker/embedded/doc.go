// Package embedded runs an in-process Kafka-protocol broker for development
// and tests.
//
// The broker is franz-go's kfake cluster with one node listening on
// 127.0.0.1. It speaks the real Kafka wire protocol over TCP, so any Kafka
// client (IBM/sarama through watermill-kafka, franz-go, the Java client) can
// produce, consume and commit consumer-group offsets against it. With
// [WithDataDir] the records, topics and committed group offsets are kept on
// disk and come back when a new broker starts on the same directory.
//
// It is not a production broker: there is a single node, no replication and
// no authentication.
package embedded
