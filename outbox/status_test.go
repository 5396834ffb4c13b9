package outbox_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/koto-dev/watermill-koto/internal/pgschema"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/telemetry"
)

// status reads the outbox's status, failing the test on an error.
func (e *env) status() outbox.Status {
	e.t.Helper()
	s, err := e.o.Status(kototest.Context(e.t))
	if err != nil {
		e.t.Fatalf("Status: %v", err)
	}
	return s
}

// TestStatus: rows committed count as waiting, rows of rolled-back or
// open transactions do not; rows committed behind an open transaction
// that wrote first count as held; a forwarder that ran leaves none waiting,
// and shows as active while it holds the table.
func TestStatus(t *testing.T) {
	e := newEnv(t)
	topic := kototest.Topic(t, "status")
	if s := e.status(); s.Table != e.o.Table() || s.Waiting != 0 || s.Held != 0 || !s.Oldest.IsZero() || s.Lag != 0 || s.Forwarder != nil {
		t.Fatalf("empty outbox: %+v", s)
	}
	e.publish(topic, newMsg("a", "k"), newMsg("b", "k"))
	e.publish(topic, newMsg("c", ""))
	rolledBack := begin(t, e)
	publishIn(t, e, rolledBack, topic, newMsg("rolled back", ""))
	if err := rolledBack.Rollback(kototest.Context(t)); err != nil {
		t.Fatal(err)
	}
	if s := e.status(); s.Waiting != 3 || s.Oldest.IsZero() || s.Lag < 0 {
		t.Fatalf("after 3 committed messages and 1 rolled back: %+v", s)
	}
	e.waitHeld(0) // transactions of other tests may hold them a moment

	old := begin(t, e)
	publishIn(t, e, old, topic, newMsg("old", ""))
	e.publish(topic, newMsg("behind old", ""))
	if s := e.status(); s.Waiting != 4 || s.Held != 1 {
		t.Fatalf("with a transaction open that wrote first, and 1 more committed: %+v; want 4 waiting, 1 held", s)
	}
	commit(t, old)
	if s := e.status(); s.Waiting != 5 {
		t.Fatalf("once it committed: %+v; want 5 waiting", s)
	}
	e.waitHeld(0)

	cfg := e.forwarderConfig()
	cfg.ApplicationName = "status-test-forwarder"
	f := e.startForwarder(cfg)
	var s outbox.Status
	kototest.WaitFor(t, "the forwarder to empty the outbox", func() bool {
		s = e.status()
		return s.Waiting == 0 && s.Forwarder != nil
	})
	if !f.Active() || s.Held != 0 || !s.Oldest.IsZero() || s.Lag != 0 || s.Forwarder.PID == 0 || s.Forwarder.ApplicationName != cfg.ApplicationName {
		t.Fatalf("forwarded: %+v, forwarder %+v", s, *s.Forwarder)
	}
	f.stop(t)
	kototest.WaitFor(t, "no active forwarder", func() bool { return e.status().Forwarder == nil })
}

// waitHeld waits until the status shows n rows held. Rows are held while
// any older transaction of the cluster runs, other tests' included.
func (e *env) waitHeld(n int64) {
	e.t.Helper()
	kototest.WaitFor(e.t, "the held rows", func() bool { return e.status().Held == n })
}

// TestStatusOfMissingTables: the status of tables that do not exist is
// ErrSchemaMissing.
func TestStatusOfMissingTables(t *testing.T) {
	pool := pgtest.Pool(t)
	o, err := outbox.New(pool, outbox.Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Status(kototest.Context(t)); !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Fatalf("Status without Setup: %v, want ErrSchemaMissing", err)
	}
}

// TestFindTables finds the outbox tables of a schema, hostile names
// included, and not the tables that only look like one; the status of
// each is read through its quoted name.
func TestFindTables(t *testing.T) {
	ctx := kototest.Context(t)
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool) + `"; DROP TABLE x; --`
	t.Cleanup(func() { pgtest.DropSchema(t, pool, schema) })
	tables := []string{`Orders"; DROP SCHEMA public; --`, "outbox"}
	for _, table := range tables {
		o, err := outbox.New(pool, outbox.Config{Schema: schema, Table: table})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := o.Status(ctx); err != nil {
			t.Fatalf("Status of %s: %v", o.Table(), err)
		}
	}
	q := pgschema.QuoteIdent(schema) + "."
	pgtest.Exec(t, pool, "CREATE TABLE "+q+"plain (id int)")
	pgtest.Exec(t, pool, "CREATE TABLE "+q+`lonely ("offset" bigint, uuid text, created_at timestamp, payload json, metadata json, transaction_id xid8)`)

	found, err := outbox.FindTables(ctx, pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cfg := range found {
		if cfg.Schema != schema {
			t.Errorf("found %q in schema %q, want %q", cfg.Table, cfg.Schema, schema)
		}
		names = append(names, cfg.Table)
	}
	if !slices.Equal(names, tables) {
		t.Fatalf("found %q, want %q", names, tables)
	}
	if found, err := outbox.FindTables(ctx, pool, pgtest.Name("koto_test_none")); err != nil || len(found) != 0 {
		t.Fatalf("in a schema that does not exist: %v, %v", found, err)
	}
}

// TestForwarderReportsBacklog: a running forwarder, standing by or active,
// reports the table's rows waiting and lag through its Telemetry, with the
// table as attribute, and stops reporting when it is closed.
func TestForwarderReportsBacklog(t *testing.T) {
	e := newEnv(t)
	topic := kototest.Topic(t, "backlog")
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	tel, err := telemetry.New(telemetry.Config{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	g := gauges{t: t, reader: reader, table: e.o.Table()}
	if p := g.collect(); p.n != 0 {
		t.Fatalf("before Run: %d outbox points", p.n)
	}

	// Hold the table's forwarder lock, so that the forwarder stands by and
	// the rows wait.
	conn, err := e.pool.Acquire(kototest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	pgtest.Exec(t, conn, "SELECT pg_advisory_lock($1::int4, $2::int4)", pgschema.ClassForwarder, pgschema.LockObject(e.o.Table()))
	cfg := e.forwarderConfig()
	cfg.Telemetry = tel
	f := e.startForwarder(cfg)
	kototest.WaitFor(t, "the gauges of an empty outbox", func() bool { p := g.collect(); return p.n == 2 })
	if p := g.collect(); p.waiting != 0 || p.lag != 0 {
		t.Fatalf("empty outbox: %+v", p)
	}
	e.publish(topic, newMsg("a", ""), newMsg("b", ""))
	e.publish(topic, newMsg("c", ""))
	if p := g.collect(); p.n != 2 || p.waiting != 3 || p.lag < 0 || f.Active() {
		t.Fatalf("3 rows waiting behind a standby forwarder: %+v, active %v", p, f.Active())
	}

	pgtest.Exec(t, conn, "SELECT pg_advisory_unlock($1::int4, $2::int4)", pgschema.ClassForwarder, pgschema.LockObject(e.o.Table()))
	kototest.WaitFor(t, "the gauges to show the outbox emptied", func() bool {
		p := g.collect()
		return p.n == 2 && p.waiting == 0 && p.lag == 0
	})
	f.stop(t)
	if p := g.collect(); p.n != 0 {
		t.Fatalf("after the forwarder stopped: %d outbox points, want none", p.n)
	}
}

// gauges reads the outbox gauges of one table from a manual reader.
type gauges struct {
	t      *testing.T
	reader *sdkmetric.ManualReader
	table  string
}

// points are the outbox gauges of one collection: n data points.
type points struct {
	n       int
	waiting int64
	lag     float64
}

func (g gauges) collect() points {
	g.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := g.reader.Collect(context.Background(), &rm); err != nil {
		g.t.Fatalf("collect: %v", err)
	}
	want := attribute.String("koto.outbox.table", g.table)
	var p points
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, dp := range data.DataPoints {
					if v, ok := dp.Attributes.Value(want.Key); m.Name == "koto.outbox.rows.waiting" && ok && v == want.Value {
						p.n, p.waiting = p.n+1, dp.Value
					}
				}
			case metricdata.Gauge[float64]:
				for _, dp := range data.DataPoints {
					if v, ok := dp.Attributes.Value(want.Key); m.Name == "koto.outbox.forward.lag" && ok && v == want.Value {
						p.n, p.lag = p.n+1, dp.Value
					}
				}
			}
		}
	}
	return p
}
