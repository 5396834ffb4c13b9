// Package koto is the vocabulary every package of watermill-koto shares:
// what a failed message's error means, how long to wait before trying
// again, the metadata keys the packages read and write, where a message
// was read from and the record it was read from ([Record]). It talks to
// nothing.
//
// # Error classes
//
// Every error that reaches the dead-letter middleware is one of three
// [Class]es, and [ClassOf] tells which:
//
//   - [ClassPoison]: the message can never succeed (a payload that does not
//     decode, a handler error marked with [Poison], a panic). It goes to the
//     dead-letter topic at once.
//   - [ClassOutage]: the infrastructure failed, not the message (a database
//     or Kafka broker out of reach, a store error, a dependency that timed
//     out, an error marked with [Outage]). It is retried with [Backoff] for
//     as long as the message's context lives and never dead-lettered.
//   - [ClassRetryable], everything else: retried a bounded number of times,
//     then dead-lettered.
//
// The packages that talk to something mark their own errors: the broker
// marks Kafka's unavailable-broker, leader and coordinator errors as
// outages, the PostgreSQL store and the outbox their connection and
// server errors. [ClassOf] also recognises, without a mark, what any
// client returns when a network or server is down; the list is at
// [ClassOf]. A handler that decodes its payload should wrap the decode
// error with [Poison]: a bare JSON error is retryable, since it may as well
// come from a dependency that answers with an HTML error page during its
// own outage.
//
// # Retries
//
// Every retry of the library waits by [Backoff]: the dead-letter
// middleware's retries of a failed message, a failed idempotency mark, a
// request's reply, a failed outbox batch and a stopped reader.
// It is exponential with equal jitter, each wait drawn uniformly between
// half the nominal wait and all of it. Without jitter every consumer that
// hit the same outage would retry in lockstep and hit the recovering
// dependency together; with equal jitter rather than full jitter each wait
// is at least half the nominal one, so the backoff still backs off and the
// elapsed-time budgets stay predictable.
//
// # Configuration
//
// Every part of the library is built from a Config struct whose zero
// value means the default. A constructor checks its Config first with the
// Config's Validate, which reports every invalid field at once, each with
// what to change, joined in one error that wraps [ErrInvalidConfig].
package koto
