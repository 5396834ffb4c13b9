package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

const designDDL = `CREATE SCHEMA IF NOT EXISTS koto;
CREATE TABLE IF NOT EXISTS koto.processed_messages (
    message_id   uuid PRIMARY KEY,
    processed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS ix_processed_messages_processed_at
    ON koto.processed_messages (processed_at);
`

func TestSchemaSQLDefaults(t *testing.T) {
	if got := postgres.SchemaSQL(postgres.Config{}); got != designDDL {
		t.Fatalf("SchemaSQL with the defaults:\n%s\nwant exactly:\n%s", got, designDDL)
	}
}

func TestSchemaSQLQuotesNames(t *testing.T) {
	got := postgres.SchemaSQL(postgres.Config{Schema: "Billing", Table: `x"; DROP TABLE y; --`})
	for _, want := range []string{
		`CREATE SCHEMA IF NOT EXISTS "Billing";`,
		`CREATE TABLE IF NOT EXISTS "Billing"."x""; DROP TABLE y; --" (`,
		`CREATE INDEX IF NOT EXISTS "ix_x""; DROP TABLE y; --_processed_at"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("SchemaSQL does not contain %s:\n%s", want, got)
		}
	}
}

// TestCreatedTableMatchesDDL reads the created table back from the catalog.
func TestCreatedTableMatchesDDL(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	s := newStore(t, pool, postgres.Config{Schema: schema})
	if err := s.EnsureSchema(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctxT(t), `SELECT column_name, data_type, is_nullable, coalesce(column_default, '')
		FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'processed_messages'
		ORDER BY ordinal_position`, schema)
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for rows.Next() {
		var name, typ, nullable, def string
		if err := rows.Scan(&name, &typ, &nullable, &def); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, strings.Join([]string{name, typ, nullable, def}, " | "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"message_id | uuid | NO | ",
		"processed_at | timestamp with time zone | NO | now()",
	}
	if strings.Join(cols, "\n") != strings.Join(want, "\n") {
		t.Fatalf("columns:\n%s\nwant:\n%s", strings.Join(cols, "\n"), strings.Join(want, "\n"))
	}
	indexes := indexesOf(t, pool, schema+".processed_messages")
	wantIdx := []string{
		"ix_processed_messages_processed_at | processed_at | btree | unique=false primary=false",
		"processed_messages_pkey | message_id | btree | unique=true primary=true",
	}
	if strings.Join(indexes, "\n") != strings.Join(wantIdx, "\n") {
		t.Fatalf("indexes:\n%s\nwant:\n%s", strings.Join(indexes, "\n"), strings.Join(wantIdx, "\n"))
	}
}

// indexesOf lists a table's indexes as name | columns | method | flags.
func indexesOf(t *testing.T, pool interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, table string) []string {
	t.Helper()
	rows, err := pool.Query(ctxT(t), `SELECT c.relname,
			(SELECT string_agg(a.attname, ',' ORDER BY k.n) FROM unnest(i.indkey) WITH ORDINALITY k(attnum, n)
				JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum),
			am.amname, i.indisunique, i.indisprimary
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
		WHERE i.indrelid = $1::regclass ORDER BY c.relname`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name, cols, method string
		var unique, primary bool
		if err := rows.Scan(&name, &cols, &method, &unique, &primary); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s | %s | %s | unique=%v primary=%v", name, cols, method, unique, primary))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCustomNames uses a mixed-case schema, a keyword as a table name and a
// table name written to inject SQL: each is stored as a literal
// identifier, and the table y that the injection aims at survives.
func TestCustomNames(t *testing.T) {
	pool := pgtest.Pool(t)
	victimSchema := pgtest.Schema(t, pool)
	pgtest.Exec(t, pool, "CREATE TABLE "+victimSchema+".y (id int)")
	schema := "Koto Mixed " + pgtest.Name("x")
	t.Cleanup(func() { pgtest.DropSchema(t, pool, schema) })
	for _, table := range []string{
		"order",
		`x"; DROP TABLE ` + victimSchema + `.y; --`,
		"Processed Messages",
	} {
		s := newStore(t, pool, postgres.Config{Schema: schema, Table: table})
		mustMark(t, s, "a")
		if !isProcessed(t, s, "a") || isProcessed(t, s, "b") {
			t.Fatalf("table %q: marks do not work", table)
		}
		if _, err := s.Cleanup(ctxT(t)); err != nil {
			t.Fatalf("table %q: Cleanup: %v", table, err)
		}
		if !relationExists(t, pool, schema, table) {
			t.Fatalf("no table named exactly %q in schema %q", table, schema)
		}
		if !relationExists(t, pool, schema, "ix_"+table+"_processed_at") {
			t.Fatalf("no index named exactly ix_%s_processed_at", table)
		}
	}
	if !relationExists(t, pool, victimSchema, "y") {
		t.Fatal("table y was dropped: a name was read as SQL")
	}
}

// TestConcurrentFirstUse starts twenty stores on a database without their
// schema, over two tables, and marks through all of them at once.
func TestConcurrentFirstUse(t *testing.T) {
	cfg := pgtest.Config(t)
	cfg.MaxConns = 24
	pool := pgtest.PoolWith(t, cfg)
	schema := pgtest.Name("koto_test")
	t.Cleanup(func() { pgtest.DropSchema(t, pool, schema) })

	const n = 20
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			s, err := postgres.NewStore(pool, postgres.Config{Schema: schema, Table: []string{"a", "b"}[i%2], CleanupInterval: -1})
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			errs <- s.MarkProcessed(ctxT(t), newUUIDKey())
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("first use by one of %d stores: %v", n, err)
		}
	}
	for _, table := range []string{"a", "b"} {
		if got := pgtest.QueryInt(t, pool, "SELECT count(*) FROM "+quoted(schema)+"."+table); got != n/2 {
			t.Fatalf("table %s holds %d marks, want %d", table, got, n/2)
		}
	}
}

// TestDisableAutoCreateSchema: with creation disabled, first use on an empty
// schema fails with an error that names the table and points at SchemaSQL,
// and creates nothing; once the table exists, the same store works.
func TestDisableAutoCreateSchema(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	missing := "koto_missing_" + schema[len("koto_test_"):]
	cfg := postgres.Config{Schema: schema, DisableAutoCreateSchema: true}
	s := newStore(t, pool, cfg)
	other := newStore(t, pool, postgres.Config{Schema: missing, DisableAutoCreateSchema: true})

	for _, err := range []error{
		s.MarkProcessed(ctxT(t), "k"),
		func() error { _, err := s.IsProcessed(ctxT(t), "k"); return err }(),
		func() error { _, err := s.Cleanup(ctxT(t)); return err }(),
		other.EnsureSchema(ctxT(t)),
	} {
		if !errors.Is(err, postgres.ErrSchemaMissing) {
			t.Fatalf("error %v, want ErrSchemaMissing", err)
		}
	}
	err := s.MarkProcessed(ctxT(t), "k")
	for _, want := range []string{schema + ".processed_messages", "postgres.SchemaSQL", "DisableAutoCreateSchema"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if n := pgtest.QueryInt(t, pool, "SELECT count(*) FROM pg_class WHERE relnamespace = $1::regnamespace", schema); n != 0 {
		t.Fatalf("%d relations created in %s with DisableAutoCreateSchema", n, schema)
	}
	if schemaExists(t, pool, missing) {
		t.Fatalf("schema %s created with DisableAutoCreateSchema", missing)
	}

	pgtest.Exec(t, pool, postgres.SchemaSQL(cfg)) // the migration
	mustMark(t, s, "k")
	if !isProcessed(t, s, "k") {
		t.Fatal("store does not work once the table exists")
	}
}
