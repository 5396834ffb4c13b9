// Package reporting is how the middleware reports what became of a
// delivery to telemetry's consumer middleware, which puts a [Reporter] in
// the message context.
package reporting

import (
	"context"
	"time"
)

// Outcome is what became of one delivery of a message.
type Outcome struct {
	// Outcome is "ok", "duplicate", "parked", "dead-lettered", "nacked" or
	// "probe".
	Outcome string
	// Attempts is how many times the handler ran.
	Attempts int
	// Err is the cause of a dead letter.
	Err error
	// ErrorClass is the class of a dead letter's cause.
	ErrorClass string
	// ErrorType is the Go type of a dead letter's root cause.
	ErrorType string
}

// Retry is a failed attempt of a handler that is retried after Delay.
type Retry struct {
	Attempt    int // from 1
	Err        error
	ErrorClass string
	Delay      time.Duration
}

// Store operations of the idempotency middleware.
const (
	StoreCheck  = "check"  // Store.IsProcessed
	StoreMark   = "mark"   // Store.MarkProcessed, one attempt
	StoreClaim  = "claim"  // the begin and claim of the transactional mode, when not deferred
	StoreCommit = "commit" // its commit
)

// Reporter receives the reports of one delivery.
type Reporter interface {
	Report(Outcome)
	Retried(Retry)
	// StoreCall starts timing a store call and returns what records it.
	StoreCall(op string) func(err error)
}

type reporterKey struct{}

// IsKey reports whether key is the context key a Reporter is found under,
// for a context type that answers it itself.
func IsKey(key any) bool { return key == reporterKey{} }

// With returns ctx carrying r, for a reporter outside the chain's
// telemetry, which passes each report on to it.
func With(ctx context.Context, r Reporter) context.Context {
	return context.WithValue(ctx, reporterKey{}, r)
}

// From returns the Reporter of ctx, or one that ignores everything.
func From(ctx context.Context) Reporter {
	if r, ok := ctx.Value(reporterKey{}).(Reporter); ok {
		return r
	}
	return nop{}
}

type nop struct{}

func (nop) Report(Outcome)               {}
func (nop) Retried(Retry)                {}
func (nop) StoreCall(string) func(error) { return func(error) {} }
