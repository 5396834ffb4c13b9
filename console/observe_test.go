package console

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/koto-dev/watermill-koto/kototest"
)

// TestReplayLogAndMetrics replays a cause with a token over HTTP, as a
// script would: the log names the token and what was replayed, and
// /metrics shows the lag it adds and the replay.
func TestReplayLogAndMetrics(t *testing.T) {
	w := newWorld(t)
	var logs kototest.Buffer
	token := Token{Name: "ops-bot", Secret: "0123456789abcdef0123"}
	h, srv := w.console(t, Config{Tokens: []Token{token}, Metrics: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := newClient(t, srv.URL)
	group := "/groups/" + url.PathEscape(w.orders.group)
	c.do(t, http.MethodGet, group, nil, token.Secret) // sets the CSRF cookie
	csrf := h.csrfMAC(c.cookie(t, csrfCookie))

	var sku *cause
	for _, cs := range h.causesOf(t, w.orders.group) {
		if strings.HasPrefix(cs.Reason, "sku") {
			sku = cs
		}
	}
	plan := c.do(t, http.MethodPost, group+"/replay", url.Values{csrfField: {csrf}, "scope": {"matching"}, "cause": {sku.ID}}, token.Secret)
	if plan.code != http.StatusSeeOther {
		t.Fatalf("plan a replay: %d %s", plan.code, plan.body)
	}
	if start := c.do(t, http.MethodPost, plan.location+"/start", url.Values{csrfField: {csrf}}, token.Secret); start.code != http.StatusSeeOther {
		t.Fatalf("start the replay: %d %s", start.code, start.body)
	}
	kototest.WaitFor(t, "the replay to end", func() bool {
		return strings.Contains(c.do(t, http.MethodGet, plan.location+"/status", nil, token.Secret).body, `"state":"done"`)
	})
	if got, want := w.replayed(t, w.orders.topic), sorted(w.orders.failed["sku"]); !slices.Equal(got, want) {
		t.Errorf("replayed %v, want %v", got, want)
	}

	for _, line := range []string{"console: replay started", "console: replay ended"} {
		re := regexp.MustCompile(regexp.QuoteMeta(line) + `".* who=ops-bot .*group=` + regexp.QuoteMeta(w.orders.group) + ` what=.*sku`)
		if !re.MatchString(logs.String()) {
			t.Errorf("no log line %q with who=ops-bot, the group and what it replays in:\n%s", line, logs.String())
		}
	}
	wantLag := fmt.Sprintf(`koto_console_consumer_group_lag{group=%q} %d`, w.orders.group, ordersLag+2)
	kototest.WaitFor(t, "the metrics to show the replay", func() bool {
		m := c.do(t, http.MethodGet, "/metrics", nil, token.Secret).body
		return strings.Contains(m, wantLag) &&
			strings.Contains(m, fmt.Sprintf(`koto_console_replayed_total{group=%q} 2`, w.orders.group)) &&
			strings.Contains(m, fmt.Sprintf(`koto_console_dead_letters{group=%q} 5`, w.orders.group)) &&
			strings.Contains(m, fmt.Sprintf(`koto_console_outbox_waiting{table="%s.outbox"} %d`, w.schema, outboxWaiting))
	})
	if resp := newClient(t, srv.URL).do(t, http.MethodGet, "/metrics", nil, ""); resp.code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without the token: %d, want 401", resp.code)
	}
}

// causesOf returns the causes of group's dead letters, as its page shows.
func (h *Handler) causesOf(t *testing.T, group string) []*cause {
	t.Helper()
	ls, _, err := h.groupLetters(kototest.Context(t), group, filter{})
	if err != nil {
		t.Fatal(err)
	}
	return groupByCause(ls)
}
