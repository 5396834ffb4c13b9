// Package parking keeps, in PostgreSQL, the messages that the dead-letter
// middleware parks (middleware.ParkingConfig): messages whose attempts
// failed and that are to be tried again later, and the messages of their
// keys that wait behind them. It brings each back through its topic, at
// its time, by scheduling it in the outbox of the same database (package
// outbox, Scheduling).
//
// In the library's layers (README, Architecture) it composes the outbox
// and the middleware's parking: it implements middleware.ParkingStore.
//
//	box, _ := outbox.New(pool, outbox.Config{})
//	parked, _ := parking.NewStore(pool, box, parking.Config{})
//	_ = parked.Setup(ctx) // at startup: the table
//	chain, _ := middleware.Defaults(middleware.Config{
//		...,
//		DeadLetter: middleware.DeadLetterConfig{Parking: middleware.ParkingConfig{
//			Store:  parked,
//			Delays: []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour},
//		}},
//	})
//
// cqrs.DurableOutbox makes one for its services (DurableOutbox.Parking).
// The outbox's forwarder must run: it sends what comes back.
//
// # Table
//
// One table per database (koto.parked by default) holds the parked
// messages of every consumer group, as consumed: the message's UUID,
// payload and metadata, its topic, partition, offset and record key. A
// consumer group's messages of one record key on one partition form a
// queue, ordered by a sequence: the first is scheduled to come back at its
// time, the others wait. [Store.Setup] creates the table and its queue
// index under an advisory lock; [SchemaSQL] gives the DDL.
//
// # Changes
//
// Each change of a queue (a message parked, parked behind, parked again,
// released) is one transaction that first takes the queue's advisory
// lock, so that changes of one queue take turns and a message parked
// behind a queue that is being emptied either joins it or finds it empty.
// Parking a message and scheduling its return commit together: a message
// is never parked without its return, nor returned without being parked.
// A message whose consumed record (partition and offset) is parked already
// is not parked twice: that is a redelivery by Kafka after a crash
// between the parking and the ack. When a queue's first is released (it
// succeeded or was dead-lettered), the next is scheduled to come back at
// once, in the same transaction.
//
// # Operations
//
// [Store.Status] reads, per consumer group, how many messages and keys are
// parked, the oldest and the next due; [Store.List] lists a group's
// parked messages; [Store.RunNow] brings a queue's first back at once;
// [Store.DeadLetter] brings it back to be dead-lettered by its consumer,
// with its history, without a handler call, after which its key moves on.
// [Store.Observe] reports the counts as gauges (koto.parked.messages,
// koto.parked.keys). `koto parked` (cmd/koto) and the console show and
// operate the same.
package parking
