package outbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
)

const defaultDDL = `CREATE SCHEMA IF NOT EXISTS koto;
CREATE TABLE IF NOT EXISTS koto.outbox (
    "offset" BIGSERIAL,
    "uuid" VARCHAR(36) NOT NULL,
    "created_at" TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "payload" JSON DEFAULT NULL,
    "metadata" JSON DEFAULT NULL,
    "transaction_id" xid8 NOT NULL,
    PRIMARY KEY ("transaction_id", "offset")
);
CREATE TABLE IF NOT EXISTS koto.outbox_offsets (
    consumer_group VARCHAR(255) NOT NULL,
    offset_acked BIGINT,
    last_processed_transaction_id xid8 NOT NULL,
    PRIMARY KEY(consumer_group)
);
CREATE TABLE IF NOT EXISTS koto.outbox_scheduled (
    id uuid PRIMARY KEY,
    due_at timestamptz NOT NULL,
    uuid varchar(36) NOT NULL,
    payload json NOT NULL,
    metadata json,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS koto.outbox_settled (
    id uuid PRIMARY KEY,
    cancelled boolean NOT NULL,
    settled_at timestamptz NOT NULL DEFAULT now()
);
`

func TestSchemaSQLDefaults(t *testing.T) {
	if got := outbox.SchemaSQL(outbox.Config{}); got != defaultDDL {
		t.Fatalf("SchemaSQL with the defaults:\n%s\nwant:\n%s", got, defaultDDL)
	}
}

// TestHostileNames: a mixed-case schema, a keyword and a name written to
// inject SQL are each a literal identifier, and the whole outbox works on
// them; the table the injection aims at survives.
func TestHostileNames(t *testing.T) {
	pool := pgtest.Pool(t)
	victim := pgtest.Schema(t, pool)
	pgtest.Exec(t, pool, "CREATE TABLE "+victim+".y (id int)")
	schema := "Koto Mixed " + pgtest.Name("x")
	t.Cleanup(func() { pgtest.DropSchema(t, pool, schema) })
	brokers := kototest.Brokers(t)
	for _, table := range []string{"order", `x"; DROP TABLE ` + victim + `.y; --`, "Outbox Table"} {
		cfg := outbox.Config{Schema: schema, Table: table}
		if ddl := outbox.SchemaSQL(cfg); !strings.Contains(ddl, `"Koto Mixed`) {
			t.Fatalf("SchemaSQL does not quote the schema:\n%s", ddl)
		}
		o, err := outbox.New(pool, cfg)
		if err != nil {
			t.Fatal(err)
		}
		e := &env{t: t, pool: pool, schema: schema, o: o, brokers: brokers}
		e.logger, e.logs = testLogger(t)
		topic := kototest.Topic(t, "hostile")
		r := newReader(t, brokers, topic)
		f := e.startForwarder(e.forwarderConfig()) // Run creates the tables
		e.publishWhenReady(topic, newMsg(table, "k"))
		if got := payloadsOf(r.next(1)); got != table {
			t.Fatalf("table %q: got %q", table, got)
		}
		f.stop(t)
		var exists bool
		if err := pool.QueryRow(kototest.Context(t), "SELECT to_regclass($1) IS NOT NULL", o.Table()).Scan(&exists); err != nil || !exists {
			t.Fatalf("no table %s: %v", o.Table(), err)
		}
	}
	var exists bool
	if err := pool.QueryRow(kototest.Context(t), "SELECT to_regclass($1) IS NOT NULL", victim+".y").Scan(&exists); err != nil || !exists {
		t.Fatal("table y was dropped: a name was read as SQL")
	}
}

// publishWhenReady publishes once the tables exist (a forwarder is
// creating them).
func (e *env) publishWhenReady(topic string, msg ...*message.Message) {
	e.t.Helper()
	kototest.WaitFor(e.t, "the tables", func() bool { return e.o.Setup(kototest.Context(e.t)) == nil })
	e.publish(topic, msg...)
}

// TestSetupConcurrently: twenty instances setting up one new schema at once
// all succeed.
func TestSetupConcurrently(t *testing.T) {
	cfg := pgtest.Config(t)
	cfg.MaxConns = 24
	pool := pgtest.PoolWith(t, cfg)
	schema := pgtest.Name("koto_test")
	t.Cleanup(func() { pgtest.DropSchema(t, pool, schema) })
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			o, err := outbox.New(pool, outbox.Config{Schema: schema})
			if err == nil {
				err = o.Setup(kototest.Context(t))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestDisableAutoCreateSchema: Setup, the forwarder and a publish say the
// tables are missing and create nothing; once the migration has run, the
// same forwarder forwards.
func TestDisableAutoCreateSchema(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	cfg := outbox.Config{Schema: schema, DisableAutoCreateSchema: true}
	o, err := outbox.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = o.Setup(kototest.Context(t))
	if !errors.Is(err, outbox.ErrSchemaMissing) || !strings.Contains(err.Error(), "outbox.SchemaSQL") {
		t.Fatalf("Setup = %v, want ErrSchemaMissing naming SchemaSQL", err)
	}
	e := &env{t: t, pool: pool, schema: schema, o: o, brokers: kototest.Brokers(t)}
	e.logger, e.logs = testLogger(t)
	e.startForwarder(e.forwarderConfig())
	kototest.WaitFor(t, "the forwarder to report the missing tables", func() bool { return e.logs.logged("outbox.SchemaSQL") })
	tx := begin(t, e)
	if err := o.Publisher(tx).Publish("orders", newMsg("x", "")); !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Fatalf("Publish = %v, want ErrSchemaMissing", err)
	}
	_ = tx.Rollback(context.Background())
	var n int
	if err := pool.QueryRow(kototest.Context(t), "SELECT count(*) FROM pg_class WHERE relnamespace = $1::regnamespace", schema).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d relations created, %v", n, err)
	}
	pgtest.Exec(t, pool, outbox.SchemaSQL(cfg))
	if err := o.Setup(kototest.Context(t)); err != nil {
		t.Fatalf("Setup after the migration: %v", err)
	}
	topic := kototest.Topic(t, "migrated")
	r := newReader(t, e.brokers, topic)
	e.publish(topic, newMsg("migrated", ""))
	if got := payloadsOf(r.next(1)); got != "migrated" {
		t.Fatalf("got %q", got)
	}
}
