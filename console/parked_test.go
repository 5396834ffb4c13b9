package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/parking"
)

// TestParkedMessages: the overview counts each group's parked messages
// and keys; the group's page lists them, with the first of each key's
// actions; running it now, or dead-lettering it, schedules it at once,
// and the one behind it cannot be run before it.
func TestParkedMessages(t *testing.T) {
	w := newWorld(t)
	box, err := outbox.New(w.pool, outbox.Config{Schema: w.schema})
	if err != nil {
		t.Fatal(err)
	}
	store, err := parking.NewStore(w.pool, box, parking.Config{Schema: w.schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx := kototest.Context(t)
	if err := store.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	ids := []string{"01900000-0000-7000-8000-0000000000a1", "01900000-0000-7000-8000-0000000000a2"}
	for i, id := range ids {
		p := &middleware.Parked{ID: id, Group: w.orders.group, Message: message.NewMessage(id, []byte("{}")),
			Position: koto.Position{Topic: w.orders.topic, Offset: int64(i), Key: []byte("order-9")},
			Parkings: 1, DueAt: time.Now().Add(time.Hour), History: []middleware.ParkedAttempt{{Error: "warehouse down", Attempts: 2}}}
		if err := store.Park(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	h, srv := w.console(t, Config{})
	c := newClient(t, srv.URL)
	overview := c.get(t, "/", http.StatusOK)
	for _, want := range []string{`id="parked-groups"`, w.orders.group, `<td class="num keys">1</td>`, `<td class="num messages">2</td>`} {
		if !strings.Contains(overview, want) {
			t.Errorf("the overview lacks %q", want)
		}
	}
	page := "/parked/" + url.PathEscape(w.orders.group)
	body := c.get(t, page, http.StatusOK)
	if !strings.Contains(body, "warehouse down") || strings.Count(body, `class="run"`) != 1 || !strings.Contains(body, "behind its key") {
		t.Fatalf("the parked page does not list the two, with one Run now:\n%s", body)
	}
	csrf := h.csrfMAC(c.cookie(t, csrfCookie))
	if resp := c.post(t, page+"/"+ids[1]+"/run", url.Values{csrfField: {csrf}}); resp.code != http.StatusBadRequest {
		t.Errorf("run of the one behind: %d, want 400", resp.code)
	}
	if resp := c.post(t, page+"/01900000-0000-7000-8000-0000000000ff/run", url.Values{csrfField: {csrf}}); resp.code != http.StatusNotFound {
		t.Errorf("run of an unknown one: %d, want 404", resp.code)
	}
	if resp := c.post(t, page+"/"+ids[0]+"/dead-letter", url.Values{csrfField: {csrf}}); resp.code != http.StatusSeeOther || resp.location != page {
		t.Fatalf("dead-letter: %d %s, want a redirect to the page", resp.code, resp.location)
	}
	entries, err := store.List(ctx, w.orders.group, 10)
	if err != nil || len(entries) != 2 || !entries[0].DeadLetter || time.Until(entries[0].DueAt) > time.Minute {
		t.Fatalf("after the dead-letter: %+v, %v; want the first due now, marked for its dead letter", entries, err)
	}
	if body := c.get(t, page, http.StatusOK); !strings.Contains(body, "to dead-letter") {
		t.Error("the page does not show the one marked for its dead letter")
	}
}
