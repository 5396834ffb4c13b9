package console

import (
	"regexp"
	"strings"
	"time"

	"github.com/koto-dev/watermill-koto/broker"
)

// command returns the koto command line that runs job k of f on group,
// so that an operator can script what the console planned: the console
// and koto dlq select with the same filter.
func command(k jobKind, group string, mapping broker.Mapping, f filter) string {
	args := []string{"koto", "dlq", string(k), "-group", group}
	flag := func(name, value string) {
		if value != "" {
			args = append(args, "-"+name, value)
		}
	}
	flag("mapping", string(mapping))
	flag("cause", f.Cause)
	flag("reason", f.Reason)
	flag("class", f.ErrorClass)
	flag("type", f.TypeName)
	flag("correlation", f.CorrelationID)
	flag("uuid", strings.Join(f.UUIDs, ","))
	if !f.Since.IsZero() {
		flag("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		flag("until", f.Until.UTC().Format(time.RFC3339Nano))
	}
	at := make([]string, len(f.Positions))
	for i, p := range f.Positions {
		at[i] = p.String()
	}
	flag("at", strings.Join(at, ","))
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return strings.Join(args, " ")
}

// shellSafe is what a POSIX shell reads as it is.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9._/:@,+=-]+$`)

// shellQuote quotes s for a POSIX shell, when it needs it.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
