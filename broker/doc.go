// Package broker wires Watermill to Kafka (IBM/sarama, with watermill-kafka's
// marshaler) with defaults that do not lose or skip messages: a publisher,
// a subscriber that can have many messages of a partition in flight with
// each key in order, topic provisioning and readers of a topic's end.
//
// In the library's layers (README, Architecture) it is the Kafka client the
// other packages build on: it marks Kafka's outage errors with package
// koto's classes itself, and imports neither middleware, cqrs nor a
// PostgreSQL client.
//
// # Defaults
//
// One [Config] feeds every client: [NewPublisher], [NewSubscriber],
// [ProvisionTopics], [NewTailReader], and the sarama clients for what
// Watermill does not offer, [NewProducer] and [NewSaramaClient].
//
//   - A new consumer group starts at the oldest offset, so it also receives
//     what was published before it first joined (sarama would start at the
//     newest and skip those silently).
//   - The producer waits for all in-sync replicas (acks=all) and is
//     idempotent: its retries cannot duplicate or reorder a partition.
//   - Messages whose metadata has koto.PartitionKeyMetadataKey get that value as
//     their Kafka record key, so one aggregate's events land on one partition
//     and stay in order. Messages without it have no key and spread over the
//     partitions.
//   - A key's partition is the one librdkafka's default partitioner picks,
//     as Confluent.Kafka's .NET services do (see Partitioners), not
//     sarama's.
//   - sarama is set to Kafka protocol version 3.6 and negotiates each request
//     down to what the broker supports.
//
// # Partitioners
//
// A key keeps its order only if every producer of the topic puts it on
// the same partition, and each Kafka client hashes keys its own way.
// [Config.Partitioner] chooses the hash of every client of the Config (the
// publisher, the producer, and with them the outbox forwarder and the
// dead-letter replay): [PartitionByCRC32], librdkafka's consistent_random
// and the default, for topics shared with Confluent.Kafka (.NET services
// on Wolverine), confluent-kafka-python, confluent-kafka-go or kcat;
// [PartitionByMurmur2] for Kafka's Java client, Kafka Streams and
// franz-go; [PartitionByFNV1a] for Go services on sarama's default
// partitioner, watermill-kafka's included. A record without a key goes to
// a random partition with each. A partitioner set in Config.Sarama
// replaces this one.
//
// # Security
//
// Config.SASL (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) and Config.TLS apply
// to every connection of every client, topic provisioning included; other
// mechanisms go through Config.Sarama, which every client applies as well.
// Credentials that Kafka rejects fail the call that connects with an error
// wrapping [ErrAuthenticationFailed], after sarama's few metadata retries
// (about a second), never in an endless retry.
//
// # Errors
//
// A publish that fails because the cluster, not the message, is the
// problem returns an error marked koto.Outage, so that the middleware
// retries it for as long as it lasts and never dead-letters it: sarama's
// ErrOutOfBrokers, ErrNotConnected, ErrControllerNotAvailable,
// ErrClosedClient and ErrShuttingDown ([ErrPublisherClosed] too: the
// service is stopping), and the Kafka errors that say a broker, a leader,
// the replicas, the controller, a coordinator or the network is
// unavailable for now (LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
// REQUEST_TIMED_OUT, BROKER_NOT_AVAILABLE, REPLICA_NOT_AVAILABLE,
// NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, NOT_ENOUGH_REPLICAS,
// NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_CONTROLLER, KAFKA_STORAGE_ERROR,
// FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
// PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
// THROTTLING_QUOTA_EXCEEDED), or that an idempotent producer's state was
// lost and a retry clears (OUT_OF_ORDER_SEQUENCE_NUMBER,
// INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING,
// UNKNOWN_PRODUCER_ID: the record was not written). Kafka flags a few
// errors of the request retriable too, UNKNOWN_TOPIC_OR_PARTITION (a
// misspelt topic) and CORRUPT_MESSAGE among them; they are not outages
// here, since retrying them for ever would block the partition. A record
// larger than the broker or the producer accepts wraps
// koto.ErrMessageTooLarge.
//
// # When offsets are committed
//
// [Subscriber] is a message.Subscriber on sarama's consumer group. Only an
// Ack counts a message as done; a Nack sends the same message again after
// [Config.NackResendSleep]. The offset a partition commits is its
// low-water mark, the first offset not yet acked, so it never passes a
// message that was not acked. Marks are committed in the background every
// second, when partitions are rebalanced, and when a subscription ends.
// What was acked in the last second before a crash is delivered again:
// delivery is at-least-once, and the idempotency middleware absorbs the
// repeats. Each message's context carries where it was read from
// (koto.PositionFromContext).
//
// When a partition is revoked, or a subscription ends (its context, or
// Close), the subscriber hands out no new message of it; the messages in
// flight have [Config.DrainTimeout] to be acked, then the low-water mark is
// committed and their contexts are cancelled. An ack that comes later
// counts for nothing: the partition's next owner gets the message again,
// never an offset it did not ack itself.
//
// # Concurrent consumption
//
// By default a subscriber has one message per partition in flight: the
// next is handed out once the previous one is acked, so a consumer handles
// at most as many messages at once as it has partitions. With
// [Config.Concurrency] above 1 it has up to that many in flight, over all
// its partitions, and promises:
//
//   - Order: with [OrderByKey], the default, at most one message per Kafka
//     record key is in flight, so each key's messages are handled, and
//     acked, in offset order; records without a key are one key of their
//     partition. [Unordered] promises no order.
//   - Redelivery: a nacked message is handed out again after
//     Config.NackResendSleep, and the later messages of its key wait for
//     it; other keys go on. A message whose partition moved or whose
//     consumer crashed before its ack is delivered again, as by default;
//     the commit also lists, in its metadata, the offsets acked above the
//     low-water mark, and the partition's next owner skips them. A record
//     that Config.Marshaler cannot decode holds its key and is tried again
//     every Config.ReconnectRetrySleep: it is never skipped.
//   - Fairness: no partition can take every slot. Each assigned partition
//     has Concurrency/(2 × partitions) slots of its own (at least one
//     when there are at least as many slots as partitions); the other
//     half is shared, first come first served. A partition whose handlers
//     all block thus holds at most its own slots and the shared ones, and
//     every other partition keeps its own. With fewer slots than
//     partitions, a partition has at most one message in flight.
//   - Back-pressure: each partition holds at most
//     [Config.PartitionBufferRecords] records fetched and not acked, and at
//     most [Config.PartitionBufferBytes] of their keys, values and headers
//     decompressed; when either is reached the partition's fetching pauses
//     until they are down to half. sarama holds besides, per partition, a
//     channel of a sixteenth of those records and one fetch of a sixteenth
//     of those bytes, counted compressed and decoded whole. A message that
//     stays unacked (a slow handler, or one nacked again and again) holds
//     the low-water mark while other keys are handled and acked above it,
//     and the commit metadata lists them: so a partition reads no further,
//     its fetching paused, while the offsets it read from its low-water mark
//     on number ten times Config.PartitionBufferRecords or more, and goes on
//     once the mark moves. What a restart may deliver again is bounded with
//     it.
//
// These limits also bound the default mode. The router runs each message
// it receives in a goroutine of its own, so the subscriber alone decides
// what is in flight. A transactional idempotent handler holds a database
// connection for each message in flight: size the pool to Concurrency.
//
// # Batches
//
// A batch subscriber ([NewBatchSubscriber]) hands out a partition's
// messages many at a time, as one message of its channel whose context
// carries them (koto.BatchFromContext), for a batch handler
// (middleware.BatchDefaults). Each message of the batch has the context a
// single message has (its position, its consumed record) and is settled
// on its own (koto.Batch's Ack and Nack); the batch message is acked or
// nacked once its handler returns, and what it left unsettled then counts
// as nacked. It promises:
//
//   - Filling: a batch holds one partition's messages in offset order. It
//     is handed out when it holds [BatchConfig].MaxMessages messages or
//     MaxBytes bytes, or MaxWait after it began filling, as soon as one of
//     the subscriber's Parallel slots is free; koto.Batch.Reason says which
//     ("count", "bytes", "time").
//   - Order: a key's messages that are read while none of it is in flight
//     go into the next batch together (as many as its count and bytes
//     take), so that a stream of one key still forms full batches; the
//     key's later messages wait until every message of it in that batch
//     is settled, and go together into a later batch. Records without a
//     key are one key of their partition.
//   - Redelivery: a nacked message waits Config.NackResendSleep, then goes
//     into a later batch first of its key. An acked one counts as the
//     single mode's ack: its offset is committed as described above, and a
//     restart skips it.
//   - Bounds: the subscriber has at most BatchConfig.Parallel batches in
//     flight, over all its partitions (a batch left to the partition's
//     next owner after Config.DrainTimeout frees its slot); a partition
//     holds, where Config.PartitionBufferRecords and PartitionBufferBytes
//     are not set, Parallel+1 batches' worth of records or the single
//     mode's default, whichever is more, and back-pressure is the single
//     mode's. Its fetches wait at most MaxWait for records.
//     Config.Concurrency and Config.Ordering do not apply. A record that
//     Config.Marshaler cannot decode holds its batch, and the batch's
//     slot, until it can be decoded.
//   - Rebalances and Close: a revoked partition hands out no new batch and
//     drains the messages of its batches in flight (Config.DrainTimeout),
//     as the single mode drains its messages.
//
// # Restarts
//
// A consumer that crashes (SIGKILL, the OOM killer, a lost node) does not
// leave its consumer group: the group waits for its session to time out,
// 10 seconds with sarama's default Consumer.Group.Session.Timeout, before
// it gives the partitions to a restarted or another member, and nothing of
// them is handled meanwhile. A consumer that stops on Close leaves its
// group, which hands its partitions over at once.
//
// [Config.GroupInstanceID] makes the subscriptions static members
// (KIP-345): a restarted instance that joins with the same ID takes its
// dead predecessor's place and partitions at once, without a rebalance.
// Each subscription's member is the ID and its topic, "pod-0.orders" (and
// a number for a second subscription to the topic in one subscriber), so
// one ID serves every consumer group of a service; give each instance its
// own, stable across its restarts (a StatefulSet pod's name, say): two
// instances with one ID fence each other out of the group. The cost: a
// static member does not leave its group on Close either, so the
// partitions of an instance that stops for good, or is scaled away, wait
// for its session timeout. Without static membership, a shorter session
// timeout (Consumer.Group.Session.Timeout in Config.Sarama, at least the
// broker's group.min.session.timeout.ms, 6 seconds by default, with
// Heartbeat.Interval a third of it) shortens every pause, and makes a
// member that misses heartbeats for that long, in a long GC pause or a
// network hiccup, lose its partitions to a rebalance.
//
// # Publishing and deadlines
//
// [Publisher] is a message.Publisher on sarama's asynchronous producer. Its
// Publish waits for Kafka's acknowledgement of each message, but no longer
// than the message's context (message.Message.Context, set with
// SetContext) lasts: when it ends, Publish returns an error that wraps the
// context's error. Watermill's publisher interface takes no context, and a
// synchronous producer cannot be interrupted, so this is how a caller keeps
// a deadline whatever the broker does (Watermill's cqrs buses, and this
// project's, put the caller's context on the message). A record given up
// that way may still be written: the producer keeps trying within sarama's
// own timeouts and retries, and logs what became of it. Close waits for
// those records; no goroutine of the publisher outlives it.
//
// [ProvisionTopics] and [TailReader] connect with connections that close
// when their context ends or the reader closes, so that a broker that
// accepts connections and never answers holds neither up.
//
// # Record mappings
//
// Config.Marshaler decides what a record looks like. The default,
// [NewPartitionKeyMarshaler], is Watermill's: the UUID in the
// _watermill_message_uuid header, every metadata entry a header of its own.
// For services that share topics with other estates there are two more,
// each chosen per service; every client of its Config uses it:
//
//   - [NewCloudEventsMarshaler], CloudEvents 1.0 over the Kafka protocol
//     binding. It writes binary mode and reads binary and structured mode
//     (content-type application/cloudevents+json, or a JSON body naming
//     specversion, as Wolverine's CloudEvents interop writes it to Kafka
//     with content-type application/json): ce_id is the message
//     UUID, ce_type the type name (koto.TypeNameMetadataKey, through
//     [TypeNames]), ce_source the service (CloudEventsConfig.Source),
//     ce_time the time of writing, content-type the datacontenttype
//     (contentTypeKey, application/json by default), the record
//     key and the partitionkey extension the partition key, the
//     correlationid extension the correlation ID, and the distributed
//     tracing extension (ce_traceparent, ce_tracestate) the W3C trace
//     context. ce_source, ce_time and any other attribute or extension read
//     are kept in the metadata as ce_<name> and written back as they were.
//     A record that is no valid CloudEvent (not one at all, specversion
//     other than 1.0, id, source or type missing, time not RFC 3339,
//     undecodable structured data) is poison. An event's idempotency key
//     (koto.IdempotencyKeyMetadataKey, which middleware.MessageKey takes)
//     is its source and id: CloudEvents 1.0 makes only the pair unique, so
//     two producers may give different events one id. In an estate whose
//     consumers deduplicate by the id alone, as a .NET consumer storing it
//     in processed_messages does, CloudEventsConfig.DeduplicateByID makes
//     the id the key, and an event of one source whose id another source
//     used within the window is skipped as a duplicate.
//   - [NewWolverineMarshaler], the envelope of Wolverine's default Kafka
//     mapper, for estates of .NET services on Wolverine: the id header is
//     the message UUID (a Guid, the value a .NET Koto consumer stores as
//     processed_messages.message_id), correlation-id the correlation ID,
//     message-type the type name (through [TypeNames]: Wolverine names a
//     type by its .NET full name), parent-id the W3C traceparent, the
//     record key the partition key (Wolverine keys a record without one by
//     its id, and so does this mapping). content-type, source and sent-at
//     are written from the message's metadata entries of those names, or
//     as application/json, WolverineConfig.Source and the time of writing
//     in Wolverine's format. Every other header, Wolverine's
//     (conversation-id, tenant-id, attempts, reply-uri, …) or not, is kept
//     in the metadata under its own name and written back.
//
// The metadata of a message read by a mapping holds every header of its
// record that the mapping did not translate, so a republished message
// carries what came in. An unmarshaler never returns
// an error, which would stop the partition: a record its mapping cannot
// read becomes a message with the record's value, headers and key, marked
// with koto.InvalidRecordMetadataKey and the reason; middleware.DeadLetter
// dead-letters it as poison without calling the handler, and the mapping
// writes it back as it was read.
//
// Wolverine checks that it can write to a topic with records that are no
// messages: a sender that recovers from a failed send writes a ping
// envelope (message-type wolverine-ping), and its resources check a record
// with key and value "ping" and no header. The Wolverine and CloudEvents
// mappings mark them with koto.ProbeMetadataKey, and middleware.DeadLetter
// acks them without calling the handler or writing a dead letter.
//
// A subscriber also puts each record as it was, key, headers and value,
// in its message's context (koto.ConsumedRecordFromContext), and the
// publisher writes a message that its context marks with
// koto.ContextWithVerbatim as that record, byte for byte, whatever
// Config.Marshaler is: that is how a dead letter stays the record its
// consumer read, in the consumer's mapping (middleware.DeadLetter). The
// tools that read records of any mapping, such as package deadletter,
// read each in the mapping its headers show with a [MappingReader].
//
// # Tail readers
//
// A [TailReader] resumes by itself a partition whose sarama consumer stops:
// sarama stops it for good when its offset is out of range, after the
// topic was deleted and created again, the broker restarted without its
// data, or records were truncated or deleted. (Leader changes and broker
// restarts that keep the data are retried by sarama itself.) The reader
// logs the stop, then consumes the partition again from the first record
// written since the last one it read (or since Start, when it read none),
// less a few seconds for producers' clocks, or from the newest offset when
// no record was written since: records written while it was down are
// read, and a few read before, or written just before Start, may be handed
// to the function. It retries every Config.ReconnectRetrySleep until it
// succeeds, and logs the recovery. Meanwhile [TailReader.Err] returns an
// error that wraps [ErrReaderDown] and the cause.
//
// # Topics
//
// [ProvisionTopics] creates the topics that do not exist yet with
// Config.Provision's settings and waits until Kafka reports each of them
// with a leader for every partition. Existing topics are left exactly as
// they are, even if their settings differ. It is safe to call at every
// start of every instance, from many at once: a topic that another caller
// created first counts as success. Every name is checked with
// topics.Validate before anything is sent to Kafka.
package broker
