package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// checkoutService is the service that places orders and whose checkout
// span is the root of an order's trace.
const checkoutService = "orders"

// treeLine is one span of a printed trace.
type treeLine struct {
	span    sdktrace.ReadOnlySpan
	depth   int
	service string
}

// printTree prints spans one a line, each under its parent and indented
// by its depth, with its service, duration and outcome. A consumer span's
// service is its consumer group's (topics.ConsumerGroup names the group
// after it); any other span's is its parent's, or rootService for a span
// whose parent is not among spans. A span whose correlation ID is not the
// trace's (correlationOf) shows its own.
func printTree(w io.Writer, spans []sdktrace.ReadOnlySpan, rootService string) {
	var lines []treeLine
	var walk func(parent trace.SpanID, depth int, service string)
	walk = func(parent trace.SpanID, depth int, service string) {
		for _, s := range spans {
			p := s.Parent().SpanID()
			root := !parent.IsValid() && !slices.ContainsFunc(spans, isSpan(p))
			if p != parent && !root {
				continue
			}
			l := treeLine{span: s, depth: depth, service: service}
			if group := attr(s, semconv.MessagingConsumerGroupNameKey); group != "" {
				l.service, _, _ = strings.Cut(group, ".")
			}
			lines = append(lines, l)
			walk(s.SpanContext().SpanID(), depth+1, l.service)
		}
	}
	walk(trace.SpanID{}, 0, rootService)

	width := 0
	for _, l := range lines {
		width = max(width, 2*l.depth+len(l.span.Name()))
	}
	cid := correlationOf(spans)
	for _, l := range lines {
		s := l.span
		name := strings.Repeat("  ", l.depth) + s.Name()
		fmt.Fprintf(w, "  %-*s  %-9s %9s", width, name, l.service, millis(s.EndTime().Sub(s.StartTime())))
		if outcome := attr(s, "koto.outcome") + attr(s, "koto.request.outcome"); outcome != "" {
			fmt.Fprintf(w, "  %s", outcome)
		}
		if own := attr(s, semconv.MessagingMessageConversationIDKey); own != "" && own != cid {
			fmt.Fprintf(w, "  correlation ID %s", own)
		}
		fmt.Fprintln(w)
	}
}

// correlationOf returns the correlation ID of the first span that has
// one: the trace's, which every message of it carries.
func correlationOf(spans []sdktrace.ReadOnlySpan) string {
	for _, s := range spans {
		if cid := attr(s, semconv.MessagingMessageConversationIDKey); cid != "" {
			return cid
		}
	}
	return ""
}

// attr returns the string attribute key of s, or "".
func attr(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// isSpan returns a test for the span id.
func isSpan(id trace.SpanID) func(sdktrace.ReadOnlySpan) bool {
	return func(s sdktrace.ReadOnlySpan) bool { return s.SpanContext().SpanID() == id }
}

// millis formats d in milliseconds, to the tenth.
func millis(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}
