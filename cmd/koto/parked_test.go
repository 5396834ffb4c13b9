package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	kotoroot "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/parking"
)

// TestParked runs parked status, list, run and dead-letter against
// PostgreSQL: a group with a key's two messages parked, the second behind
// the first. Only the first can be run or dead-lettered; each schedules it
// in the outbox.
func TestParked(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	box := newOutbox(t, pool, outbox.Config{Schema: schema})
	store, err := parking.NewStore(pool, box, parking.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx := kototest.Context(t)
	if err := store.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, id := range []string{"01900000-0000-7000-8000-000000000001", "01900000-0000-7000-8000-000000000002"} {
		p := &middleware.Parked{ID: id, Group: "payments", Message: message.NewMessage(id, []byte("{}")),
			Position: kotoroot.Position{Topic: "orders", Partition: 3, Offset: int64(10 + i), Key: []byte("order-7")},
			Parkings: 1, DueAt: time.Now().Add(time.Hour), History: []middleware.ParkedAttempt{{Error: "card service down", Attempts: 3}}}
		if err := store.Park(ctx, p); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	env := map[string]string{envDatabaseURL: pgtest.URL()}
	out, stderr, code := kotoEnv(t, env, "parked", "status", "-schema", schema)
	for _, want := range []string{"GROUP", "NEXT DUE", "payments", schema + ".parked"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("status (exit %d) lacks %q:\n%s%s", code, want, out, stderr)
		}
	}
	out, _, _ = kotoEnv(t, env, "parked", "status", "-schema", schema, "-json")
	var st []shownParkedStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st) != 1 || st[0].Keys != 1 || st[0].Messages != 2 || st[0].NextDue == nil {
		t.Fatalf("status -json: %s (%v)", out, err)
	}
	out, _, code = kotoEnv(t, env, "parked", "list", "-schema", schema, "-group", "payments")
	if code != 0 || !strings.Contains(out, ids[0]) || !strings.Contains(out, "behind") || !strings.Contains(out, "card service down") || !strings.Contains(out, "3/10") {
		t.Fatalf("list (exit %d):\n%s", code, out)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", ids[1]}, 1, "behind another message of its key"},
		{[]string{"run", "01900000-0000-7000-8000-0000000000ff"}, 1, "no such parked message"},
		{[]string{"run"}, 2, "takes 1 argument"},
		{[]string{"list"}, 2, "-group is empty"},
		{[]string{"run", ids[0]}, 0, ids[0] + " runs now"},
		{[]string{"dead-letter", ids[0]}, 0, "comes back to be dead-lettered"},
	} {
		out, stderr, code := kotoEnv(t, env, append([]string{"parked"}, append(c.args, "-schema", schema)...)...)
		if code != c.code || !strings.Contains(out+stderr, c.want) {
			t.Errorf("parked %q: exit %d, %q%q; want exit %d and %q", c.args, code, out, stderr, c.code, c.want)
		}
	}
	entries, err := store.List(ctx, "payments", 10)
	if err != nil || len(entries) != 2 || !entries[0].DeadLetter || time.Until(entries[0].DueAt) > time.Minute {
		t.Fatalf("after run and dead-letter: %+v, %v; want the first due now and marked for its dead letter", entries, err)
	}
	s, err := box.Status(ctx)
	if err != nil || s.Scheduled != 1 {
		t.Errorf("outbox status %+v, %v: want one schedule, the last one's", s, err)
	}
}
