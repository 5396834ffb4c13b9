package middleware

import (
	"context"
	"log/slog"
	"sync"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/koto-dev/watermill-koto/internal/reporting"
)

// outcome is what became of one delivery of a message: the "outcome" field
// of the [Logging] line.
type outcome string

const (
	// outcomeOK: the handler succeeded; the message is acked.
	outcomeOK outcome = "ok"
	// outcomeDuplicate: the message was already processed; it is acked
	// without calling the handler, or, in the transactional mode, with
	// what the handler did in the transaction rolled back.
	outcomeDuplicate outcome = "duplicate"
	// outcomeRetry: an attempt failed ([koto.ClassOutage] or [koto.ClassRetryable])
	// and is retried after a backoff. Logged once per retry, before the
	// wait.
	outcomeRetry outcome = "retry"
	// outcomeDeadLettered: the message ([koto.ClassPoison], or [koto.ClassRetryable]
	// past its retries) is on the dead-letter topic; it is acked.
	outcomeDeadLettered outcome = "dead-lettered"
	// outcomeParked: the message is parked (see Parking in the package
	// doc), after its attempts failed or behind its key's parked
	// messages; it is acked and comes back later.
	outcomeParked outcome = "parked"
	// outcomeNacked: the chain returned an error (an outage that outlived
	// the message's context, a dead letter that could not be published);
	// the router nacks the message and the subscriber redelivers it.
	outcomeNacked outcome = "nacked"
	// outcomeProbe: the record is another client's probe
	// (koto.ProbeMetadataKey); it is acked without calling the handler.
	outcomeProbe outcome = "probe"
)

// report is how the inner middlewares tell [Logging] what happened. Logging
// puts one in the message context; the others fill it. A nil *report (no
// Logging in the chain) ignores everything.
type report struct {
	mu         sync.Mutex
	outcome    outcome
	attempts   int
	attrs      []slog.Attr
	deadLetter *deadLetterNote // set with outcomeDeadLettered
	onRetry    func(retryNote)
	onLate     func(msg string, err error)
}

// deadLetterNote describes the dead letter of a delivery.
type deadLetterNote struct {
	cause     error
	class     koto.Class
	errorType string // dlqmeta.ErrorType
}

// retryNote describes a failed attempt that is about to be retried.
type retryNote struct {
	err     error
	class   koto.Class
	attempt int
	delay   time.Duration
}

type reportKey struct{}

func withReport(ctx context.Context, r *report) context.Context {
	return context.WithValue(ctx, reportKey{}, r)
}

func reportFrom(ctx context.Context) *report {
	r, _ := ctx.Value(reportKey{}).(*report)
	return r
}

// set records the outcome and extra log attributes.
func (r *report) set(o outcome, attrs ...slog.Attr) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcome = o
	r.attrs = append(r.attrs, attrs...)
}

// deadLettered records that the message went to the dead-letter topic.
func (r *report) deadLettered(n deadLetterNote, attrs ...slog.Attr) {
	if r == nil {
		return
	}
	r.set(outcomeDeadLettered, attrs...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deadLetter = &n
}

// note adds log attributes without changing the outcome.
func (r *report) note(attrs ...slog.Attr) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attrs = append(r.attrs, attrs...)
}

// setAttempts records how many times the handler was called.
func (r *report) setAttempts(n int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = n
}

// retry reports a failed attempt that will be retried.
func (r *report) retry(n retryNote) {
	if r == nil || r.onRetry == nil {
		return
	}
	r.onRetry(n)
}

// late reports a failure that happened after the delivery's line was
// logged.
func (r *report) late(msg string, err error) {
	if r == nil || r.onLate == nil {
		return
	}
	r.onLate(msg, err)
}

// result is the final account of a delivery whose chain returned err.
type result struct {
	outcome    outcome
	attempts   int
	attrs      []slog.Attr
	deadLetter *deadLetterNote
}

// result returns the outcome of the delivery, decided here and nowhere
// else: nacked when the chain returned an error, otherwise what the inner
// middlewares recorded, or ok.
func (r *report) result(err error) result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := result{outcome: r.outcome, attempts: r.attempts, attrs: append([]slog.Attr(nil), r.attrs...), deadLetter: r.deadLetter}
	switch {
	case err != nil:
		res.outcome, res.deadLetter = outcomeNacked, nil
	case res.outcome == "":
		res.outcome = outcomeOK
	}
	return res
}

// telemetry returns the account of the delivery for the telemetry
// package.
func (res result) telemetry() reporting.Outcome {
	d := reporting.Outcome{Outcome: string(res.outcome), Attempts: res.attempts}
	if n := res.deadLetter; n != nil {
		d.Err, d.ErrorClass, d.ErrorType = n.cause, n.class.String(), n.errorType
	}
	return d
}
