package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
)

// TestOutboxStatus runs outbox status against PostgreSQL: two outbox
// tables of a schema, one with rows waiting, then emptied by a forwarder.
func TestOutboxStatus(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	orders := newOutbox(t, pool, outbox.Config{Schema: schema})
	newOutbox(t, pool, outbox.Config{Schema: schema, Table: "Billing"})
	for range 2 {
		publishThroughOutbox(t, orders, 2)
	}
	due := time.Now().Add(time.Hour)
	if _, err := orders.AutoTxPublisher().Schedule(due, kototest.Topic(t, "orders.reminder"), message.NewMessage(watermill.NewUUID(), []byte("{}"))); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{envDatabaseURL: pgtest.URL()}

	out, stderr, code := kotoEnv(t, env, "outbox", "status", "-schema", schema)
	for _, want := range []string{"TABLE", "WAITING", "LAG", "SCHEDULED", "SCHEDULED SINCE", "NEXT DUE", "FORWARDER", schema + `."Billing"`, schema + ".outbox", "none active"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("status (exit %d) lacks %q:\n%s%s", code, want, out, stderr)
		}
	}
	got := statusJSON(t, env, "-schema", schema)
	if len(got) != 2 || got[0].Table != schema+`."Billing"` || got[0].Waiting != 0 || got[0].Oldest != nil ||
		got[1].Table != schema+".outbox" || got[1].Waiting != 4 || got[1].Oldest == nil || got[1].LagSeconds < 0 || got[1].Forwarder != nil ||
		got[0].Scheduled != 0 || got[0].NextDue != nil || got[1].Scheduled != 1 || got[1].NextDue == nil || got[1].NextDue.Sub(due).Abs() > time.Millisecond ||
		got[1].ScheduledSince == nil || got[0].ScheduledSince != nil {
		t.Fatalf("status -json: %+v", got)
	}

	f, err := outbox.NewForwarder(orders, outbox.ForwarderConfig{
		Broker: broker.Config{Brokers: kototest.Brokers(t)}, ApplicationName: "koto-test-forwarder", Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Run(context.Background()) }()
	t.Cleanup(func() {
		_ = f.Close()
		if err := <-done; err != nil {
			t.Errorf("forwarder: %v", err)
		}
	})
	kototest.WaitFor(t, "the forwarder to empty the outbox", func() bool {
		got = statusJSON(t, env, "-schema", schema, "-table", "outbox")
		return len(got) == 1 && got[0].Waiting == 0 && got[0].Forwarder != nil
	})
	if got[0].Oldest != nil || got[0].LagSeconds != 0 || got[0].Forwarder.ApplicationName != "koto-test-forwarder" {
		t.Fatalf("emptied: %+v, forwarder %+v", got[0], *got[0].Forwarder)
	}
	out, _, code = kotoEnv(t, env, "outbox", "status", "-schema", schema, "-table", "outbox")
	if code != 0 || !strings.Contains(out, "(koto-test-forwarder)") || strings.Contains(out, "Billing") {
		t.Fatalf("status -table outbox (exit %d):\n%s", code, out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-schema", schema, "-table", "missing"}, "tables missing"},
		{[]string{"-schema", pgtest.Name("koto_test_none")}, "no outbox table in schema"},
		{[]string{"-schema", `x"; DROP SCHEMA ` + schema + ` CASCADE--`}, "no outbox table in schema"},
		{[]string{"-schema", schema, "-table", `"; DROP SCHEMA ` + schema + ` CASCADE--`}, "tables missing"},
		{[]string{"-schema", schema, "-database-url", "postgres://127.0.0.1:1/test?connect_timeout=5"}, "connect"},
	} {
		_, stderr, code := kotoEnv(t, env, append([]string{"outbox", "status"}, tc.args...)...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("outbox status %q: exit %d, stderr %q; want exit 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if n := pgtest.QueryInt(t, pool, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", schema); n != 1 {
		t.Fatalf("schema %s gone after a hostile -schema", schema)
	}
}

// newOutbox makes the outbox of cfg and its tables.
func newOutbox(t *testing.T, pool *pgxpool.Pool, cfg outbox.Config) *outbox.Outbox {
	t.Helper()
	o, err := outbox.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Setup(kototest.Context(t)); err != nil {
		t.Fatal(err)
	}
	return o
}

// publishThroughOutbox commits a transaction that writes n messages into o.
func publishThroughOutbox(t *testing.T, o *outbox.Outbox, n int) {
	t.Helper()
	err := o.Transact(kototest.Context(t), func(ctx context.Context, tx pgx.Tx) error {
		for range n {
			if err := o.Publisher(tx).Publish(kototest.Topic(t, "orders.order-placed"), message.NewMessage(watermill.NewUUID(), []byte("{}"))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// statusJSON runs outbox status -json with args.
func statusJSON(t *testing.T, env map[string]string, args ...string) []shownStatus {
	t.Helper()
	out, stderr, code := kotoEnv(t, env, append([]string{"outbox", "status", "-json"}, args...)...)
	var got []shownStatus
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("status -json %q: exit %d, %v\n%s%s", args, code, err, out, stderr)
	}
	return got
}
