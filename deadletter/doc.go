// Package deadletter lists, shows, replays and discards the dead letters
// of a consumer group: the messages that the dead-letter middleware
// (middleware.DeadLetter) published to topics.DeadLetter(group) when its
// handler could not process them. It is the API under the koto command's
// dlq subcommands and the console's.
//
// In the library's layers (README, Architecture) it composes broker and
// the dead-letter middleware's metadata, and speaks to the replay group's
// coordinator through sarama itself; it imports neither cqrs, outbox nor a
// PostgreSQL client.
//
// # Reading
//
// A [Queue] reads its topic without a consumer group, each partition from
// its oldest offset up to the end it had when the call started, so a
// listing ends and a replay never reads its own failures. Each record
// becomes a [Letter]: its position, UUID, type name and correlation ID,
// and what the middleware recorded under its dead_letter_* headers
// (failed at, error class and type, reason, original topic, partition and
// offset, consumer group, handler, attempts). A record that another
// producer wrote shows with those fields empty.
//
// A dead letter is the record its consumer read, in that consumer's
// record mapping, which may not be the mapping of the services that read
// it now: each record is read in the mapping its headers show
// (broker.DetectMapping: CloudEvents' ce_* headers or structured body,
// Wolverine's id and message-type, Watermill's _watermill_message_uuid),
// so the UUID is ce_id, Wolverine's id or Watermill's, and the type name
// ce_type or message-type as they are on the wire, unless
// Config.Broker.Marshaler, which reads the records of its own mapping,
// maps them. Config.Mapping reads every record in one mapping instead.
//
// [Filter] selects by time, reason text, error class, type name, UUID,
// correlation ID, position and cause. A cause ([Letter].Cause) is an error
// class and a reason once its variable parts are masked ([MaskReason]):
// the dead letters that failed the same way, which the console groups
// together; the console and the koto command select a cause with the same
// Filter. A read that Kafka leaves unanswered for 5 s fails the call
// (Config.Broker.Sarama may set Net.ReadTimeout otherwise), rather than
// end it as if the topic held nothing more.
//
// Reading never creates a topic, even on a cluster that creates the
// topics its clients ask about: when the dead-letter topic does not exist
// (the group never dead-lettered anything, or its name is misspelt), List,
// Show, Replay and Discard fail with [ErrNoTopic], and [Groups] lists the
// groups that have one.
//
// # Replay
//
// [Queue.Replay] sends the selected dead letters back to their original
// topic as they are: the record the consumer read (key, value and every
// header, its mapping's included, so that the consumer reads the same
// message with the same UUID, type and correlation ID, whatever mapping
// the services publish in), the dead_letter_* headers, which stay as
// history, and the dead_letter_replayed_from header. The consumer's
// handler runs again because a dead-lettered message is never marked
// processed: in the chain that middleware.Defaults builds, DeadLetter
// wraps Idempotency, which marks a message only when the handler succeeds
// (with Idempotency outside DeadLetter, the replay would be skipped as a
// duplicate). A replayed message that fails again is dead-lettered again,
// as a new dead letter whose dead_letter_* keys describe the new failure;
// a later replay can send it once more.
//
// Each record goes back to the partition it was consumed from, keyed or
// not, while the topic still has that partition: the consumer meets it
// where it met the original, in its key's order, even when the services'
// partitioner has changed since. One from a partition the topic no longer
// has goes where the services' partitioner puts it (the same sarama
// partitioner, Config.Broker.Sarama included).
//
// A replay confirmed after a dry run must send what the dry run counted,
// though dead letters keep arriving: read the topic's ends with
// [Queue.Ends] first and give them to both as ReplayOptions.Ends, and the
// replay reads only as far as the dry run did. The bound is an offset
// rather than a time because a dead letter's time is the clock of the
// consumer that failed it, and its publication may come late: one that
// arrives after the dry run can carry an earlier time than those the dry
// run counted.
//
// # Discard
//
// [Queue.Discard] records the selected dead letters as discarded in the
// replay group: a record that must never be replayed (junk, a test
// message, an order cancelled by hand) is then resolved, shown discarded
// ([Letter].Discarded), and passed over by every later replay, however it
// is filtered. Nothing is sent and nothing is deleted: the dead letters
// stay in the topic until its retention. A dead letter replayed already
// stays replayed. Discard takes the same Filter and ReplayOptions as
// Replay (DryRun, Ends, Progress), and runs like it, in batches of
// Config.BatchSize.
//
// # The replay group
//
// A replay records what it sent, and a discard what it discarded, in a
// consumer group of its own, Config.ReplayGroup ("<group>.dlq-replay" by
// default), as offsets of the dead-letter topic committed without joining
// the group, as Kafka's tools do. A partition's committed offset is its
// first dead letter neither replayed nor discarded; those above it that
// were (a filtered replay leaves gaps) are in the commit's metadata, a
// compressed bitmap; the discarded ones, above that offset or below it,
// are a second bitmap beside the first. So a later replay with another
// filter still finds every dead letter an earlier one passed over, no
// dead letter is sent twice by two replays, however they were filtered,
// and a discarded one is never sent. Kafka's tools show the group's lag as
// the number of offsets from the first unresolved dead letter to the end.
//
// The metadata says its format: "dlq1:" and the replayed bitmap while
// nothing is discarded, which every version of this package reads;
// "dlq2:" once something is, which a version without discards refuses
// (it fails, rather than replay what was discarded). Moving the group's
// offset with Kafka's tools (kafka-consumer-groups --reset-offsets)
// commits it without metadata: everything below counts as replayed, the
// discards below it included, and nothing above it as resolved. A consumer
// that joins the group does the same with every offset it commits, so a
// replay or a discard refuses to start while the group has members
// ([ErrReplayGroupInUse]).
//
// Kafka deletes the offsets a group without members committed once they
// are older than the broker's offsets.retention.minutes (7 days by
// default), and a replay group never has members. A partition whose record
// expired is read again from its oldest dead letter, and the dead letters
// that an earlier replay sent and the topic still holds are sent again.
// Keep offsets.retention.minutes above the dead-letter topic's retention.ms
// plus its segment.ms (Kafka deletes whole segments), or replay within the
// offsets' retention.
//
// The metadata must stay under Kafka's offset.metadata.max.bytes (4096 by
// default); that holds tens of thousands of scattered replayed or
// discarded offsets. A replay or discard that would need more fails with
// errProgressFull before it sends or records anything more.
//
// Run one replay or discard of a replay group at a time. A replay reads
// the group again before each batch and merges what it finds before each
// commit, so a second replay running at the same time skips most of what
// the first sent, but Kafka has no compare-and-set for offsets, and the
// two can overlap by a batch.
//
// # What a crash leaves
//
// Sending a batch and recording it are two steps: the produce (acks from
// all in-sync replicas, idempotent producer), then the commit in the
// replay group. A dead letter is sent twice only when Kafka wrote it and
// the commit did not follow: the replay crashed in between, the produce
// timed out after Kafka wrote the records (the replay takes the batch for
// not sent), or the commit failed. The next replay then sends that batch
// again, at most Config.BatchSize dead letters. A failed commit is
// returned as an error that says how many dead letters it leaves
// unrecorded. A cancelled context does not open the window: Replay checks
// it before each produce, and records a produced batch even when the
// context ends meanwhile. (Kafka transactions could make the two steps
// one, but consumers read uncommitted records by default, watermill-kafka's
// included, and would see the records of an aborted transaction anyway.)
//
// What the consumer makes of a dead letter sent twice: both copies carry
// the same UUID and land on the same partition, so the failed group's
// consumer handles them one after the other. With the idempotency
// middleware, when the first copy succeeds its UUID is marked (scoped by
// the group) and the second is skipped as a duplicate; when the first
// fails again, it is dead-lettered again and not marked, so the second runs
// too and is likely dead-lettered as well: two dead letters with one UUID,
// and replaying both later runs the handler once. The handler's effects
// therefore happen once, with the middleware's own caveat for any delivery
// (see "Check, handle, mark" in the middleware package doc). Without
// Idempotency in the chain, or for a record without a UUID (its key falls
// back to the record's position, which differs between the copies), each
// copy runs the handler.
//
// # Who else gets a replay
//
// The original topic is read by every consumer group subscribed to it,
// not only the one that failed: they receive the replay too. Their
// idempotency middleware skips it as a duplicate only while they remember
// the original (idempotency.DefaultWindow, 24 hours, by default); a replay
// after that runs their handlers again. Add [OnlyOwnReplays] to the
// handlers of those groups: it acks a replay meant for another group
// without handling it.
package deadletter
