// Package offsets reads what consumer lag is made of, with a sarama
// client: the consumer groups of a cluster, the offsets a group has
// committed, and the first and end offsets of topics' partitions. The
// console computes lag and dead-letter counts from them.
//
// Each call is one round of requests (end offsets batched per partition
// leader), bounded by the client's own timeouts.
package offsets
