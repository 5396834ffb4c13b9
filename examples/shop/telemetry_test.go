package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/koto-dev/watermill-koto/kototest"
)

// TestShopTelemetry runs the example's checkout with -metrics, -trace and
// -v, on the harness: once its messages are handled, it scrapes /metrics
// over HTTP and checks the counters of its scenario, and checks the
// printed trace of the first order, the tree and the JSON, then the trace
// as -trace prints it without -v: the tree alone.
func TestShopTelemetry(t *testing.T) {
	h := kototest.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var trace bytes.Buffer
	const orders = 3
	opts := options{metrics: ln, trace: &trace, traceJSON: true, out: io.Discard}
	obs, err := newObservability(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.Defer(obs.Close) // after the shop, deferred next
	shop := startShop(t, h, opts, obs)
	if err := shop.checkout(h.Context(), "t", orders); err != nil {
		t.Fatalf("checkout: %v", err)
	}
	settle(h)

	payments, inventory, paid := "payments.order-placed-consumer", "inventory.reserve-stock-consumer", "orders.payment-processed-consumer"
	want := []sample{
		// Each order is published twice: charged once, skipped once.
		{"messaging_client_consumed_messages_total", map[string]string{"messaging_consumer_group_name": payments, "koto_outcome": "ok"}, orders},
		{"messaging_client_consumed_messages_total", map[string]string{"messaging_consumer_group_name": payments, "koto_outcome": "duplicate"}, orders},
		{"messaging_client_consumed_messages_total", map[string]string{"messaging_consumer_group_name": payments, "koto_outcome": "dead-lettered"}, 1},
		{"koto_consumer_dead_letters_total", map[string]string{"messaging_consumer_group_name": payments, "koto_error_class": "poison"}, 1},
		// One reservation per order, and the out-of-stock one, answered with an error.
		{"messaging_client_consumed_messages_total", map[string]string{"messaging_consumer_group_name": inventory, "koto_outcome": "ok"}, orders + 1},
		{"koto_request_duration_seconds", map[string]string{"koto_request_outcome": "ok"}, orders},
		{"koto_request_duration_seconds", map[string]string{"koto_request_outcome": "handler-error"}, 1},
		{"messaging_client_consumed_messages_total", map[string]string{"messaging_consumer_group_name": paid, "koto_outcome": "ok"}, orders},
		// The forwarder has emptied the outbox.
		{"koto_outbox_rows_waiting", map[string]string{"koto_outbox_table": h.Schema() + ".outbox"}, 0},
		{"koto_outbox_forward_lag_seconds", map[string]string{"koto_outbox_table": h.Schema() + ".outbox"}, 0},
	}
	url := "http://" + ln.Addr().String() + "/metrics"
	got, err := scrape(url)
	if err != nil {
		t.Fatal(err)
	}
	if diff := matches(got, want); diff != "" {
		t.Errorf("metrics at %s once the checkout's messages are handled:%s", url, diff)
	}
	// Every span of the trace has ended: its deliveries have.
	ctx := h.Context()
	if err := obs.printTrace(ctx, shop.traced); err != nil {
		t.Fatalf("printTrace: %v", err)
	}
	tree, full, ok := strings.Cut(trace.String(), "\nits ")
	if !ok {
		t.Fatalf("no tree before the JSON:\n%s", trace.String())
	}
	if _, full, ok = strings.Cut(full, " spans in full:\n"); !ok {
		t.Fatalf("no spans in JSON printed:\n%s", trace.String())
	}
	checkPrintedTree(t, tree)
	checkPrintedJSON(t, full)

	trace.Reset()
	obs.json = false
	if err := obs.printTrace(ctx, shop.traced); err != nil {
		t.Fatalf("printTrace: %v", err)
	}
	if strings.Contains(trace.String(), "{") {
		t.Errorf("without -v, JSON is printed:\n%s", trace.String())
	}
	checkPrintedTree(t, trace.String())
}

// checkPrintedTree checks the tree that -trace prints: a header with the
// correlation ID, then one line per span, indented under its parent, with
// its service and duration; a line names no correlation ID of its own.
func checkPrintedTree(t *testing.T, out string) {
	t.Helper()
	header, body, _ := strings.Cut(strings.TrimLeft(out, "\n"), "\n\n")
	if !strings.HasPrefix(header, "trace ") || !strings.Contains(header, ", correlation ID checkout-o-") {
		t.Errorf("header %q, want the trace and the checkout's correlation ID", header)
	}
	type line struct {
		depth         int
		name, service string
	}
	var got []line
	for l := range strings.Lines(strings.TrimRight(body, "\n")) {
		trimmed := strings.TrimLeft(l, " ")
		fields := strings.Fields(trimmed)
		ms := slices.Index(fields, "ms") // name..., service, duration, "ms", outcome?
		if ms < 3 || strings.Contains(l, "correlation ID") {
			t.Errorf("span line %q, want name, service, duration in ms, maybe an outcome, and no correlation ID of its own", l)
			continue
		}
		got = append(got, line{depth: (len(l) - len(trimmed) - 2) / 2, name: strings.Join(fields[:ms-2], " "), service: fields[ms-2]})
	}
	want := []line{
		{0, "checkout", "orders"},
		{1, "request inventory.reserve-stock", "orders"},
		{2, "send inventory.reserve-stock", "orders"},
		{3, "process inventory.reserve-stock", "inventory"},
		{4, "send orders.replies", "inventory"},
		{1, "send orders.payment-timed-out", "orders"}, // into the schedule, cancelled by the payment
		{1, "send orders.order-placed", "orders"},      // through the outbox, twice
		{2, "process orders.order-placed", "payments"},
		{3, "send payments.payment-processed", "payments"},
		{4, "process payments.payment-processed", "orders"},
		{1, "send orders.order-placed", "orders"},
		{2, "process orders.order-placed", "payments"}, // a duplicate
	}
	if !slices.Equal(got, want) {
		t.Errorf("tree (depth, span, service):\n got %v\nwant %v\nprinted:\n%s", got, want, out)
	}
}

// sample is a metric's value for the series whose labels include labels:
// a counter's or a gauge's value, or a histogram's count.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape fetches and parses url.
func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// matches returns "" when got has every sample of want, and otherwise
// what differs.
func matches(got map[string]*dto.MetricFamily, want []sample) string {
	var b strings.Builder
	for _, w := range want {
		var value float64
		series := 0
		for _, m := range got[w.name].GetMetric() {
			if hasLabels(m, w.labels) {
				value += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount()) + m.GetGauge().GetValue()
				series++
			}
		}
		switch {
		case series == 0:
			fmt.Fprintf(&b, "\n%s%v missing, want %v", w.name, w.labels, w.value)
		case value != w.value:
			fmt.Fprintf(&b, "\n%s%v = %v, want %v", w.name, w.labels, value, w.value)
		}
	}
	return b.String()
}

func hasLabels(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(labels)
}

// checkPrintedJSON checks the spans that -trace -v prints in the stdout
// exporter's JSON: all of one trace, from the checkout to the consumer of
// PaymentProcessed, each with the checkout's correlation ID.
func checkPrintedJSON(t *testing.T, full string) {
	t.Helper()
	type span struct {
		Name        string
		SpanContext struct{ TraceID string }
		Attributes  []struct {
			Key   string
			Value struct{ Value any }
		}
	}
	dec := json.NewDecoder(strings.NewReader(full))
	names := map[string]int{}
	traces := map[string]bool{}
	for dec.More() {
		var s span
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("decoding the printed spans: %v", err)
		}
		names[s.Name]++
		traces[s.SpanContext.TraceID] = true
		cid := ""
		for _, a := range s.Attributes {
			if a.Key == "messaging.message.conversation_id" {
				cid = fmt.Sprint(a.Value.Value)
			}
		}
		if s.Name != "checkout" && !strings.HasPrefix(cid, "checkout-o-") {
			t.Errorf("span %s: correlation ID %q, want the checkout's", s.Name, cid)
		}
	}
	if len(traces) != 1 {
		t.Errorf("the printed spans are in %d traces, want 1", len(traces))
	}
	for name, n := range map[string]int{
		"checkout":                           1,
		"request inventory.reserve-stock":    1,
		"process inventory.reserve-stock":    1,
		"send orders.replies":                1,
		"send orders.order-placed":           2, // published twice
		"send orders.payment-timed-out":      1, // scheduled, never consumed
		"process orders.order-placed":        2, // ok, then duplicate
		"send payments.payment-processed":    1,
		"process payments.payment-processed": 1,
	} {
		if names[name] != n {
			t.Errorf("%d spans %q printed, want %d", names[name], name, n)
		}
	}
	if t.Failed() {
		t.Logf("printed:\n%s", full)
	}
}
