// Package embedded runs an in-process Kafka-protocol broker for development
// and tests.
//
// It stands beside the library's layers: only tests, examples and the
// commands import it.
//
// The broker is franz-go's kfake cluster with one node listening on
// 127.0.0.1. It speaks the real Kafka wire protocol over TCP, so any Kafka
// client (IBM/sarama through watermill-kafka, franz-go, the Java client) can
// produce, consume and commit consumer-group offsets against it. With
// [WithDataDir] the records, topics and committed group offsets are kept on
// disk and come back when a new broker starts on the same directory, or
// when [Broker.Restart] starts this one again.
//
// # Security
//
// [WithSASLUser] makes every connection authenticate (PLAIN, SCRAM-SHA-256
// or SCRAM-SHA-512) and [WithTLS] makes it encrypted, to test clients
// configured as for a secured cluster: sarama, franz-go and librdkafka
// (kcat, Confluent's .NET, Go and Python clients) log in with each
// mechanism. Rejected credentials are answered as Kafka answers them, with
// SASL_AUTHENTICATION_FAILED, so that clients report an authentication
// failure rather than a dropped connection. The broker implements SASL
// handshake v1 (authentication in SaslAuthenticate requests) and advertises
// versions 0 to 1, as librdkafka requires to enable SASL; a client that
// sends the legacy v0 handshake is answered UNSUPPORTED_VERSION. There are
// no ACLs: an authenticated user may do anything.
//
// # Faults
//
// Tests that need a misbehaving broker get the kfake cluster from
// [Broker.Cluster] and inject faults with it (failed, delayed or answered
// requests), or stop the broker with [Broker.Close] and bring it back on the
// same address with [Broker.Restart].
//
// It is not a production broker: there is a single node and no replication.
package embedded
