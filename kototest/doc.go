// Package kototest is for the tests of services built on this module: a
// [Harness] starts, for one test, an embedded Kafka broker and a
// PostgreSQL schema of its own, runs the services under test on a
// Watermill router as they run in production (cqrs Services, router
// handlers behind middleware.Defaults, a DurableOutbox and its forwarder),
// waits until what the test published has been handled, and records what
// became of each message.
//
// # Waiting
//
// [Harness.Wait] returns once every message published so far, and
// everything those messages caused, has been handled, dead-lettered, or
// waits on a schedule. It decides from the state of things, never from a
// time without activity: no delivery of the harness's router is in
// flight; no outbox table of the harness's schema holds a row, or a
// scheduled message that is due; and every
// partition of every topic that holds records has been finished up to its
// end by each consumer group that reads the topic, by the router's handler
// of that group (an ack) or by the group's committed offset. A message a
// handler publishes before it returns is in Kafka, or in the outbox,
// before its delivery ends, so Wait sees the follow-ups of every message,
// and theirs. Dead-letter topics (".dlq") and reply topics (".replies")
// need no reader, nor the topics given to [Sinks]; any other topic with
// records that no group reads keeps Wait waiting: when the time is up, the
// failure names the topic and its offsets, as it names every delivery in
// flight, outbox row and group behind. Wait wakes at the end of each
// delivery, and reads the broker and the outbox every few milliseconds
// for what comes from elsewhere.
//
// What Wait cannot see: work a handler starts on a goroutine of its own
// and that publishes after the handler returned, and services on another
// router or process (their groups' committed offsets still count, about a
// second late).
//
// # Time
//
// Scheduled messages (outbox, Scheduling) and parked ones, which come
// back through the outbox's schedule (middleware, Parking), wait for their
// due time, and Wait does not wait for those not due. [Harness.Advance]
// makes time pass for them without a sleep: it counts, for each message
// scheduled in the harness's schema, the time advanced since it was
// scheduled, gives each that this makes due its due time less that time,
// in its schedule ID as well (the ID holds the due time the forwarder
// reads), and notifies the forwarder as a schedule's commit does. From
// there the forwarder moves the message into the outbox and forwards it,
// and its consumer handles it, as in production; a Wait after Advance
// waits for all of that. Only the due times move: the services' clock is
// the real one, and a message scheduled or parked after an Advance counts
// the Advances after it alone.
//
// A message not yet due keeps its schedule ID, and Cancel stops it as
// ever. One that Advance made due is as good as sent: Cancel with its ID
// says outbox.ErrSent, and a parked message's entry, in a parking table
// of the harness's schema, follows it, so that parking's RunNow and
// DeadLetter act on it.
//
// # Records
//
// [Harness.Deliveries] lists each delivery of the router once it ended,
// with its [Outcome] (handled, duplicate, parked, dead-lettered, nacked),
// its retries and its message; [Consumed] decodes the payloads of one type,
// [Harness.DeadLetters] and [Harness.NoDeadLetters] check the dead letters
// in one line. The outcome is what the chain's middleware.Logging decides:
// a chain without it reports every acked delivery as handled.
//
// # Without a broker
//
// [Invoke] calls a cqrs consumer's function directly with an event, a
// correlation ID and, with [InTx], a transaction of the test's database,
// for unit tests of a handler's logic.
//
// # Helpers
//
// Tests that build their own clients, as this module's own tests do, use
// the helpers the harness is made of. [Brokers] is the broker of a test:
// the cluster that KAFKA_BROKERS names ([EnvBrokers]) when it is set,
// otherwise an embedded broker of the test's own; [Embedded] is always
// one, for faults ([StallRequests]) and restarts. [Topic] and [Group] make
// random names, so that tests never see each other's records on a shared
// cluster. [NewPublisher], [NewSubscriber], [Admin], [NewRouter] and
// [RunRouter] open what [Harness.Wait] would follow; [Receive], [WaitFor],
// [WaitForCount], [WaitCommitted] and [ReadAll] wait for or read what
// became of a message; [FlakyPublisher] fails on demand. Whatever a helper
// opens is closed when the test finishes, and whatever it waits for, it
// waits for at most [DefaultTimeout] — a count ([WaitForCount],
// [WaitCommitted]) for at most that long without moving, so that a volume
// a slow machine handles slowly is not taken for a stall. [VerifyTestMain] checks, after the tests of a
// package, that no goroutine is left over; it waits for those that end
// after the Close that stops them returned, as sarama's do.
//
// Package [github.com/koto-dev/watermill-koto/kototest/pgtest] gives a
// test a PostgreSQL pool and a schema of its own, and cuts or slows down
// the connection to the database; the harness stands on it.
package kototest
