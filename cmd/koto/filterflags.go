package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/koto-dev/watermill-koto/deadletter"
)

// filterFlags select dead letters, as a deadletter.Filter.
type filterFlags struct {
	since, until                   timeFlag
	reason, class, typeName, cause string
	correlation                    string
	uuids, positions               listFlag
	limit                          int
}

func (f *filterFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.since, "since", "only dead letters that failed at or after this time: RFC 3339 (2026-03-01T12:00:00Z), a date (2026-03-01, UTC), or a duration before now (90m, 48h)")
	fs.Var(&f.until, "until", "only dead letters that failed before this time, in the forms of -since")
	fs.StringVar(&f.reason, "reason", "", "only dead letters whose reason contains this text, ignoring case")
	fs.StringVar(&f.class, "class", "", "only dead letters of this error class, e.g. poison or retryable")
	fs.StringVar(&f.typeName, "type", "", "only dead letters of this message type name, e.g. order-placed (ce_type and Wolverine's message-type as they are on the wire)")
	fs.Var(&f.uuids, "uuid", "only dead letters with this message UUID (Watermill's, ce_id or Wolverine's id); repeat the flag or separate with commas for several")
	fs.StringVar(&f.correlation, "correlation", "", "only dead letters with this correlation ID")
	fs.StringVar(&f.cause, "cause", "", "only dead letters of this cause, as list and the console name it: one error class and one reason once its variable parts are masked")
	fs.Var(&f.positions, "at", "only the dead letters at these positions, PARTITION/OFFSET as list prints them; repeat the flag or separate with commas for several")
	fs.IntVar(&f.limit, "limit", 0, "stop after this many selected dead letters (replay: sent; discard: discarded), 0 for all")
}

func (f *filterFlags) filter() (deadletter.Filter, error) {
	filter := deadletter.Filter{
		Since: f.since.t, Until: f.until.t,
		Reason: f.reason, ErrorClass: f.class, TypeName: f.typeName,
		UUIDs: f.uuids, CorrelationID: f.correlation, Cause: f.cause, Limit: f.limit,
	}
	for _, s := range f.positions {
		at, err := deadletter.ParsePosition(s)
		if err != nil {
			return filter, usageError("-at: " + err.Error())
		}
		filter.Positions = append(filter.Positions, at)
	}
	if err := filter.Validate(); err != nil {
		return filter, usageError(err.Error())
	}
	return filter, nil
}

// timeFlag is a point in time given as RFC 3339, a date or a duration
// before now.
type timeFlag struct {
	t   time.Time
	raw string
}

func (f *timeFlag) String() string { return f.raw }

func (f *timeFlag) Set(s string) error {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return fmt.Errorf("duration %s is not positive; it counts back from now", s)
		}
		f.t, f.raw = time.Now().Add(-d), s
		return nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			f.t, f.raw = t, s
			return nil
		}
	}
	return fmt.Errorf("%q is neither RFC 3339 (2026-03-01T12:00:00Z), a date (2026-03-01) nor a duration (48h)", s)
}

// listFlag collects comma-separated values over repeated flags.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// optionalBool is a boolean flag that knows whether it was given.
type optionalBool struct {
	set, value bool
}

func (b *optionalBool) String() string {
	if !b.set {
		return ""
	}
	return strconv.FormatBool(b.value)
}

func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.set, b.value = true, v
	return nil
}

func (b *optionalBool) IsBoolFlag() bool { return true }

// or returns the value if the flag was given, otherwise def.
func (b *optionalBool) or(def bool) bool {
	if b.set {
		return b.value
	}
	return def
}
