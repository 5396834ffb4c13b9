package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/koto-dev/watermill-koto/deadletter"
)

// reasonWidth is where the table cuts a reason.
const reasonWidth = 60

// timeLayout shows times in the table and in show: UTC, to the millisecond.
const timeLayout = "2006-01-02T15:04:05.000Z"

// letterTable writes one line per dead letter. to, if set, adds a column
// for where each went or would go.
func letterTable(w io.Writer, letters []*deadletter.Letter, to func(i int) string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "POSITION\tFAILED AT\tTYPE\tCLASS\tUUID\tORIGINAL\tSTATE\tCAUSE\tREASON"
	if to != nil {
		header += "\tTO"
	}
	fmt.Fprintln(tw, header)
	for i, l := range letters {
		line := strings.Join([]string{
			position(l), orDash(formatTime(l.FailedAt)), orDash(l.TypeName), orDash(l.ErrorClass), orDash(l.UUID),
			orDash(original(l)), state(l), orDash(l.Cause), orDash(cut(l.Reason, reasonWidth)),
		}, "\t")
		if to != nil {
			line += "\t" + to(i)
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

func position(l *deadletter.Letter) string { return l.Position().String() }

// state says what the replay group records of l.
func state(l *deadletter.Letter) string {
	switch {
	case l.Replayed:
		return "replayed"
	case l.Discarded:
		return "discarded"
	}
	return "pending"
}

// original is where the dead letter was consumed from: topic/partition/offset.
func original(l *deadletter.Letter) string {
	if l.OriginalTopic == "" {
		return ""
	}
	if l.OriginalPartition < 0 {
		return l.OriginalTopic
	}
	return fmt.Sprintf("%s/%d/%d", l.OriginalTopic, l.OriginalPartition, l.OriginalOffset)
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cut shortens s to n runes on one line, marking the cut with "…".
func cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// showLetter writes one dead letter whole.
func showLetter(w io.Writer, topic string, l *deadletter.Letter) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "dead letter\t%s %s\n", topic, position(l))
	for _, f := range [][2]string{
		{"uuid", l.UUID}, {"type", l.TypeName}, {"mapping", string(l.Mapping)}, {"failed at", formatTime(l.FailedAt)},
		{"error class", l.ErrorClass}, {"error type", l.ErrorType}, {"reason", l.Reason}, {"cause", l.Cause},
		{"original", original(l)}, {"consumer group", l.ConsumerGroup}, {"handler", l.Handler},
		{"attempts", strconv.Itoa(l.Attempts)}, {"correlation id", l.CorrelationID},
		{"state", state(l)}, {"timestamp", formatTime(l.Timestamp)}, {"key", quoteIfNeeded(l.Key)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", f[0], orDash(f[1]))
	}
	if l.Dropped != "" {
		fmt.Fprintf(tw, "dropped:\t%s\n", l.Dropped)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "metadata:")
	for _, k := range slices.Sorted(maps.Keys(l.Metadata)) {
		fmt.Fprintf(w, "  %s: %s\n", k, l.Metadata[k])
	}
	kind, body := payloadText(l.Payload)
	fmt.Fprintf(w, "payload (%d bytes, %s):\n%s\n", len(l.Payload), kind, body)
	return nil
}

// payloadText returns a payload as pretty JSON when it is JSON, as a Go
// quoted string otherwise.
func payloadText(p []byte) (kind, text string) {
	if len(p) > 0 && json.Valid(p) {
		var b bytes.Buffer
		if err := json.Indent(&b, p, "", "  "); err == nil {
			return "JSON", b.String()
		}
	}
	return "not JSON, escaped", strconv.Quote(string(p))
}

// quoteIfNeeded shows text as it is, anything else quoted.
func quoteIfNeeded(b []byte) string {
	s := string(b)
	if q := strconv.Quote(s); q[1:len(q)-1] != s {
		return q
	}
	return s
}

// shownLetter is the JSON of show: the letter with its key and payload.
// The payload is embedded when it is JSON, a string when it is UTF-8
// text, base64 otherwise.
type shownLetter struct {
	Topic string `json:"topic"`
	*deadletter.Letter
	Key           string          `json:"key,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadText   *string         `json:"payload_text,omitempty"`
	PayloadBase64 []byte          `json:"payload_base64,omitempty"`
}

func newShownLetter(topic string, l *deadletter.Letter) shownLetter {
	s := shownLetter{Topic: topic, Letter: l, Key: string(l.Key)}
	switch p := l.Payload; {
	case len(p) > 0 && json.Valid(p):
		s.Payload = p
	case utf8.Valid(p):
		text := string(p)
		s.PayloadText = &text
	default:
		s.PayloadBase64 = p
	}
	return s
}

// writeJSON writes v indented, for people reading scripts' output too.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
