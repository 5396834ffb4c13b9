package main

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/internal/cli"
)

// FuzzFilterFlags parses the dlq commands' filter flags from any text. A
// time flag either takes the value (and prints it back as given, a
// duration as a time before now) or fails saying which forms it takes; a
// filter whose range ends before it starts is a usage error; the -uuid
// list keeps every non-blank comma-separated value, trimmed, and reads back
// the same from its own String.
func FuzzFilterFlags(f *testing.F) {
	f.Add("2026-03-01T12:00:00Z", "2026-03-02", "a, b,,c", -1)
	f.Add("48h", "90m", " ", 0)
	f.Add("-5m", "0s", "\xff,\x00", 3)
	f.Add("2026-03-01T12:00", "2026-03-01T12:00:00", "x", 1)
	f.Add("2026-02-30", "9999999999h", ",,,", 0)
	f.Add("1e3h", "2026-03-01T12:00:00+25:00", "u1\tu2", 0)
	f.Fuzz(func(t *testing.T, since, until, uuids string, limit int) {
		var ff filterFlags
		fs := flag.NewFlagSet("dlq", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		ff.register(fs)
		before := time.Now()
		for _, tf := range []struct {
			name, value string
			flag        *timeFlag
		}{{"since", since, &ff.since}, {"until", until, &ff.until}} {
			err := tf.flag.Set(tf.value)
			if err != nil {
				if tf.flag.t != (time.Time{}) || !strings.Contains(err.Error(), "RFC 3339") && !strings.Contains(err.Error(), "not positive") {
					t.Fatalf("-%s %q: %v, and time %v; want a zero time and an error naming the forms", tf.name, tf.value, err, tf.flag.t)
				}
				continue
			}
			if tf.flag.String() != tf.value || tf.flag.t.IsZero() {
				t.Fatalf("-%s %q reads back as %q, time %v", tf.name, tf.value, tf.flag.String(), tf.flag.t)
			}
			if d, err := time.ParseDuration(tf.value); err == nil && !tf.flag.t.Before(before) && d > 0 {
				t.Fatalf("-%s %q gives %v, not before now", tf.name, tf.value, tf.flag.t)
			}
		}
		_ = ff.uuids.Set(uuids)
		for _, u := range ff.uuids {
			if u == "" || u != strings.TrimSpace(u) || strings.Contains(u, ",") {
				t.Fatalf("-uuid %q gives value %q", uuids, u)
			}
		}
		var again listFlag
		_ = again.Set(ff.uuids.String())
		if !slices.Equal(again, ff.uuids) {
			t.Fatalf("-uuid %q: %q reads back as %q", uuids, ff.uuids, again)
		}
		ff.limit = limit
		filter, err := ff.filter()
		bad := limit < 0 || !ff.since.t.IsZero() && !ff.until.t.IsZero() && !ff.since.t.Before(ff.until.t)
		if bad != (err != nil) || err != nil && !errors.Is(err, cli.ErrUsage) {
			t.Fatalf("filter since %q until %q limit %d: %v", since, until, limit, err)
		}
		if err == nil && (!filter.Since.Equal(ff.since.t) || !slices.Equal(filter.UUIDs, ff.uuids)) {
			t.Fatalf("filter %+v does not carry the flags", filter)
		}
	})
}
