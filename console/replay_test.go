package console

import (
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/koto-dev/watermill-koto/kototest"
)

// TestReplaySendsWhatItCounted plans a replay of every dead letter of a
// type, which no time bounds, then dead-letters one more of that type
// before confirming: the replay sends the dead letters the confirmation
// counted and not the new one, which the next replay finds.
func TestReplaySendsWhatItCounted(t *testing.T) {
	w := newWorld(t)
	h, srv := w.console(t, Config{})
	c := newClient(t, srv.URL)
	group := "/groups/" + url.PathEscape(w.orders.group)
	c.get(t, group, http.StatusOK) // sets the CSRF cookie
	csrf := h.csrfMAC(c.cookie(t, csrfCookie))
	selection := url.Values{csrfField: {csrf}, "scope": {"matching"}, "type": {"negative"}}
	counted := sorted(w.orders.failed["negative"])

	plan := c.post(t, group+"/replay", selection)
	if plan.code != http.StatusSeeOther {
		t.Fatalf("plan a replay: %d %s", plan.code, plan.body)
	}
	if body := c.get(t, plan.location, http.StatusOK); !strings.Contains(body, `<strong id="plan-count">3</strong>`) {
		t.Fatalf("the confirmation does not count the 3 negative dead letters (plan %d)", h.jobs.get(path.Base(plan.location)).Plan.Sent)
	}

	pub := kototest.NewPublisher(t, w.cfg)
	w.orders.publish(t, pub, "negative", `{"kind":"negative","order":300}`)
	w.consume(t, pub)

	if start := c.post(t, plan.location+"/start", url.Values{csrfField: {csrf}}); start.code != http.StatusSeeOther {
		t.Fatalf("start the replay: %d %s", start.code, start.body)
	}
	kototest.WaitFor(t, "the replay to end", func() bool {
		return strings.Contains(c.get(t, plan.location+"/status", http.StatusOK), `"state":"done"`)
	})
	if got := w.replayed(t, w.orders.topic); !slices.Equal(got, counted) {
		t.Errorf("replayed %v, want the %d counted: %v", got, len(counted), counted)
	}
	if body := c.get(t, plan.location, http.StatusOK); !strings.Contains(body, `<span data-field="sent" id="sent">3</span>`) {
		t.Errorf("the result page does not say 3 were sent: %s", c.get(t, plan.location+"/status", http.StatusOK))
	}

	next := c.post(t, group+"/replay", selection)
	if body := c.get(t, next.location, http.StatusOK); !strings.Contains(body, `<strong id="plan-count">1</strong>`) {
		t.Errorf("the next replay does not count the one dead-lettered meanwhile (plan %d)", h.jobs.get(path.Base(next.location)).Plan.Sent)
	}
}
