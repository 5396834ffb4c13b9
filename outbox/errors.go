package outbox

import "errors"

// Sentinel errors of this package, wrapped by the errors that add the
// details; test for them with errors.Is.
var (
	// ErrNoTransaction means a publish or a call that needs a transaction
	// found none: the message's context, or ctx, does not carry one (see
	// Outbox.Transact). Nothing was written or published.
	ErrNoTransaction = errors.New("outbox: no transaction in reach")

	// ErrSchemaMissing means the outbox tables do not exist: Setup found
	// them missing with DisableAutoCreateSchema set, or a publish wrote to
	// a table that is not there. The message names the table and says how
	// to create it.
	ErrSchemaMissing = errors.New("outbox: tables missing")

	// ErrInvalidMessage means a message cannot be forwarded to Kafka as it
	// is: its topic breaks Kafka's naming rules (the error also wraps
	// topics.ErrInvalid), it is larger than Config.MaxMessageBytes, or its
	// metadata is not UTF-8. Nothing was written.
	ErrInvalidMessage = errors.New("outbox: message cannot be forwarded")

	// ErrKeyLockAfterWrite is returned by LockKeys when the transaction
	// has written already: its position in the outbox is fixed, and a key
	// lock taken now cannot order it (see the package documentation).
	ErrKeyLockAfterWrite = errors.New("outbox: key lock taken after the transaction's first write")

	// ErrNotThroughOutbox is returned by PublishDomainEvents when its
	// publisher published an event without writing it into the outbox in
	// the transaction of ctx: it is not built on Outbox.ContextPublisher.
	ErrNotThroughOutbox = errors.New("outbox: event publisher does not write into the outbox")

	// ErrInvalidSchedule means a message was scheduled at the zero time or
	// after a negative delay. Nothing was written; no retry can change it,
	// so the error is marked koto.Poison.
	ErrInvalidSchedule = errors.New("outbox: invalid schedule")

	// ErrSent is returned by Cancel for a scheduled message that was sent
	// already: it became due and went into the outbox, and from there to
	// Kafka.
	ErrSent = errors.New("outbox: scheduled message already sent")

	// ErrCancelled is returned by Cancel for a scheduled message that a
	// committed Cancel cancelled before.
	ErrCancelled = errors.New("outbox: scheduled message already cancelled")

	// ErrUnknownSchedule is returned by Cancel for an ID that names no
	// scheduled message: never scheduled in this outbox, scheduled in a
	// transaction that has not committed or rolled back, or settled longer
	// ago than ForwarderConfig.ScheduleRetention after its due time.
	ErrUnknownSchedule = errors.New("outbox: no such scheduled message")
)
