// Package outbox is the transactional outbox: messages are written into a
// PostgreSQL table in the same transaction as the business rows they
// announce, and a forwarder moves them to Kafka once that transaction has
// committed. A rolled-back transaction publishes nothing; a committed one
// publishes every message it wrote, even if the process dies right after
// the commit. It also sends messages later, at a time they are scheduled
// for, and cancels them until then.
//
// In the library's layers (README, Architecture) it is a part that talks
// to PostgreSQL, and to Kafka through package broker; it imports no
// middleware.
//
// # Writing
//
// [New] describes one outbox table per database (koto.outbox by default)
// and [Outbox.Setup] creates it, under an advisory lock, at startup;
// [SchemaSQL] gives the DDL for external migrations. [Outbox.Transact] runs
// a function in a transaction whose context carries it, as the
// transactional consumer mode (middleware's IdempotencyConfig.Transactional)
// does for its handlers. Three publishers write into the outbox, each a
// message.Publisher, so Watermill's and this module's cqrs publishers can
// be pointed at them unchanged:
//
//   - [Outbox.ContextPublisher] writes each message into the transaction of
//     its context. A message without one is an error wrapping
//     [ErrNoTransaction] and is never published some other way: the code
//     that lost its transaction on the way is caught. Use it by default.
//   - [Outbox.Publisher] writes into the pgx.Tx it is given, for code that
//     holds a transaction of its own.
//   - [Outbox.AutoTxPublisher] writes the messages that find no transaction
//     into one of their own, committed before Publish returns: for a
//     message that announces nothing a transaction writes (a reminder, a
//     notice) but should still be durable and ordered with the rest.
//
// A message keeps its UUID (one without gets a
// UUIDv7), its payload and its metadata, gains the correlation ID of its
// context if it has none, and its partition_key metadata becomes the Kafka
// record key, exactly as with a direct publish through the broker package.
// Each write also queues a pg_notify, which PostgreSQL delivers on commit
// and which wakes the forwarder at once.
//
// Aggregates that collect domain events ([Aggregate], [Events]) have them
// written by [PublishDomainEvents] in the transaction that saves them; they
// are cleared only when it commits, so a rollback leaves them on the
// aggregate and publishes none.
//
// # Table format
//
// The table is watermill-sql's default PostgreSQL messages table
// (DefaultPostgreSQLSchema) with its offsets table (<table>_offsets,
// DefaultPostgreSQLOffsetsAdapter): watermill-sql's DDL, insert, row
// mapping and position queries keep it in that format. Each row holds one
// message in the envelope format of Watermill's components/forwarder
// (destination topic, UUID, payload, metadata), so Watermill's forwarder
// can read the table too; its uuid column is the message's idempotency
// key, idempotency.KeyUUID(msg.UUID).
//
// # Order
//
// Rows are forwarded in the order of their transaction IDs (xid8), and in
// insertion order within a transaction. A transaction gets its ID at its
// first write, not at its commit, so two transactions can commit in the
// other order than they are forwarded: T2 writes something, T1 writes
// message A and commits, T2 writes message B and commits; B reaches Kafka
// before A. Where the order of one key's messages matters (the key being
// their partition key, so that they share a partition), take the key's
// lock with [Outbox.LockKeys] before the transaction's first write: a
// second transaction on that key then waits for the first to end before
// it writes, gets a later ID, and its messages follow. Messages of one key
// then reach their partition in the order their transactions committed.
// LockKeys after a write is refused with [ErrKeyLockAfterWrite]. The key
// locks are transaction-scoped advisory locks in the two-int4 key space,
// (0x6b6f7405, hashtext(key)), which PostgreSQL keeps apart from the
// single-bigint one: an application's pg_advisory_lock(42) never waits for
// an outbox key, nor an outbox key for it.
//
// # Forwarding
//
// A [Forwarder] runs in every instance. One is active per table: it holds
// a session advisory lock on a dedicated connection, outside the pool, and
// on that connection it listens for the notifications, reads and records
// its position; the others stand by and try the lock every
// TakeoverInterval, so one of them takes over within about that long when
// the active one stops, dies or loses its connection (which releases the
// lock, and with it any chance of recording a position).
//
// The active forwarder reads up to BatchSize rows after its position with
// watermill-sql's visibility guard: only rows of transactions older than
// every running one (transaction_id < pg_snapshot_xmin), so that no row of
// a lower ID can commit later and the position never passes a message.
// Rows committed behind a transaction that is still running wait for it,
// however long it runs; the forwarder looks again after a few
// milliseconds, growing to about a second (or PollInterval, if shorter),
// so that the rows go within a second of the transaction's end. The guard is cluster-wide: any
// long transaction holds back every outbox, so keep transactions short.
// The forwarder produces the batch with one SendMessages call of the
// broker package's producer (acks=all, idempotent) and, while Kafka takes
// it, reads the next one. Only when Kafka has acknowledged every record of
// the batch does it move its position past the batch and delete the
// batch's rows, in one transaction, committed without waiting for the WAL
// flush (a position lost in a crash of PostgreSQL only sends its batch
// again). No transaction is open while Kafka is called, and the table
// holds only what is not forwarded yet.
//
// Delivery is at least once. If the forwarder dies between the produce and
// the recording, the next one sends that batch again, with the same UUIDs,
// which the idempotency middleware of the consumers drops. During a Kafka
// or PostgreSQL outage rows stay in the table and the forwarder retries
// with RetryBackoff; when the outage ends they go out in order. It wakes on
// every commit that wrote into the table and looks anyway every
// PollInterval, so a lost notification, or the loss of the connection,
// costs at most that long.
//
// Messages are checked when written (a topic Kafka would refuse, a message
// over Config.MaxMessageBytes, metadata that is not UTF-8: ErrInvalidMessage,
// marked koto.Poison, so that a handler that returns the error is
// dead-lettered at once rather than retried) so that a row Kafka refuses
// should not happen; if it does, the forwarder retries it and logs the
// error until Kafka's limit is raised. A row that is not a message envelope
// at all, or names a topic Kafka would refuse, which no Publisher writes,
// is logged and skipped. A row whose message ForwarderConfig.Broker's
// Marshaler refuses (a CloudEvents mapping and a message without a type
// name, a bug of a mapping) is not skipped, which would delete a committed
// message: the Marshaler is configuration, which a fix or a redeploy
// changes. The forwarder logs the row's uuid, offset and error, produces
// and deletes nothing of its batch and retries with RetryBackoff, as in an
// outage; the rows behind it wait, so that the order holds.
//
// # Scheduling
//
// [Publisher.Schedule] and [Publisher.ScheduleAfter] write a message to be
// sent at a given time, in the Publisher's transaction as Publish writes,
// so that a rollback schedules nothing, and return the schedule's ID.
// [Publisher.Cancel] with that ID deletes it, in a transaction the same
// way: once that commits, the message is never sent. A message no longer
// scheduled cannot be cancelled: Cancel says [ErrSent], [ErrCancelled] or,
// for an ID it does not know, [ErrUnknownSchedule]. The zero time or a
// negative delay is refused with [ErrInvalidSchedule]; a time already past
// is due at once.
//
// Scheduled messages wait in a table of their own, <Table>_scheduled,
// until they are due, so that the outbox table keeps watermill-sql's
// format and holds only what is to be forwarded now. Watermill's forwarder
// can still read the outbox table; only this package's [Forwarder] sends
// scheduled messages. The active forwarder moves each message into the
// outbox table once it is due, in one short transaction with up to
// BatchSize others, done on its connection while Kafka takes the previous
// batch, and forwards it as any other row: with its UUID, metadata and
// partition key, at least once (a crash can send it twice, with the same
// UUID). Only the active forwarder moves messages, and each move deletes
// what it moves, so a message goes into the outbox once however many
// forwarders run.
//
// A schedule's ID is a UUIDv7 whose time is the due time, rounded up to
// the millisecond, so that no message is sent before its time and the
// table's primary key, its one index, orders it by due time. The forwarder
// reads the earliest due time and sleeps until then; the commit of a
// schedule notifies it of its due time on [Outbox.Channel], so an earlier
// one wakes it. It
// never polls the schedule: PollInterval is the outbox's. A message that a
// Cancel holds is skipped and tried again after a few milliseconds; a
// Cancel that meets the forwarder moving its message waits for that
// transaction and then says ErrSent.
//
// What was sent leaves the scheduled table. What became of each message,
// sent or cancelled, is kept in <Table>_settled, a row of its ID and a
// flag, for ForwarderConfig.ScheduleRetention (7 days by default) after
// its due time, so that Cancel can tell ErrSent and ErrCancelled from an
// unknown ID; the active forwarder prunes it once a minute, in batches.
//
// # Status and metrics
//
// [Outbox.Status] reads a table's backlog: the committed rows waiting,
// how many of them are held behind an older running transaction, the
// oldest one's created_at, the forwarder's lag and the active forwarder,
// if any. The offsets table keeps the forwarder's position but no time,
// and forwarded rows are deleted with the move of the position, so the
// rows waiting are the rows after the position (the whole table) and the
// lag is the age of the oldest of them: how long the message that has
// waited longest has been waiting. Status is one read-only statement that
// takes no transaction ID and no lock a forwarder waits for, but it
// counts the backlog, so its cost grows with it. created_at is a
// timestamp without time zone, written in the writer's TimeZone setting
// and read in Status's: keep them the same (the server's default) for a
// true lag. [FindTables] lists the outbox tables of a schema by their
// columns, and `koto outbox status` (cmd/koto) prints the status of each.
//
// Status also reads the scheduled messages not yet moved (Scheduled),
// when the one scheduled longest ago was scheduled (OldestScheduled) and
// when the earliest is due (NextDue).
//
// Every running [Forwarder], standing by or active, reports its table's
// backlog to ForwarderConfig.Telemetry through telemetry's
// ObserveOutbox: koto.outbox.rows.waiting, koto.outbox.forward.lag and
// koto.outbox.scheduled, with the table as koto.outbox.table, read with
// Status at each collection. The active forwarder records how late it
// moved each scheduled message, its fire time minus its due time, as
// koto.outbox.schedule.lateness. Standbys report too, so the backlog still shows when no
// forwarder is active; take the maximum across instances. Run's return
// unregisters the gauges.
package outbox
