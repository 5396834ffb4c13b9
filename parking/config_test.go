package parking_test

import (
	"errors"
	"strings"
	"testing"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/parking"
)

// TestConfig: a bad configuration fails at construction, naming the field;
// the zero one is valid, and its DDL is koto.parked's.
func TestConfig(t *testing.T) {
	if err := (parking.Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	for field, cfg := range map[string]parking.Config{
		"Schema": {Schema: strings.Repeat("s", 64)},
		"Table":  {Table: strings.Repeat("t", 58)},
	} {
		err := cfg.Validate()
		if !errors.Is(err, koto.ErrInvalidConfig) || !strings.Contains(err.Error(), "parking.Config."+field+" ") {
			t.Errorf("%s: %v, want ErrInvalidConfig naming the field", field, err)
		}
	}
	pool := pgtest.Pool(t)
	box, err := outbox.New(pool, outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parking.NewStore(nil, box, parking.Config{}); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("NewStore(nil pool): %v", err)
	}
	if _, err := parking.NewStore(pool, nil, parking.Config{}); !errors.Is(err, koto.ErrInvalidConfig) {
		t.Errorf("NewStore(nil outbox): %v", err)
	}
	ddl := parking.SchemaSQL(parking.Config{})
	for _, want := range []string{"CREATE SCHEMA IF NOT EXISTS koto;", "CREATE TABLE IF NOT EXISTS koto.parked (", "CREATE INDEX IF NOT EXISTS parked_queue ON koto.parked"} {
		if !strings.Contains(ddl, want) {
			t.Errorf("SchemaSQL lacks %q:\n%s", want, ddl)
		}
	}
}

// TestSetupAndFindTables: with DisableAutoCreateSchema a missing table is
// ErrSchemaMissing and nothing is created; Setup creates a table of a
// hostile name, quoted, which FindTables finds, and Status reads.
func TestSetupAndFindTables(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := kototest.Context(t)
	box, err := outbox.New(pool, outbox.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	hostile := `Parked"; DROP SCHEMA ` + schema + ` CASCADE; --`
	checkOnly, err := parking.NewStore(pool, box, parking.Config{Schema: schema, Table: hostile, DisableAutoCreateSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkOnly.Setup(ctx); !errors.Is(err, parking.ErrSchemaMissing) {
		t.Fatalf("Setup with DisableAutoCreateSchema: %v, want ErrSchemaMissing", err)
	}
	if _, err := checkOnly.Status(ctx); !errors.Is(err, parking.ErrSchemaMissing) {
		t.Errorf("Status of a missing table: %v, want ErrSchemaMissing", err)
	}
	store, err := parking.NewStore(pool, box, parking.Config{Schema: schema, Table: hostile})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	found, err := parking.FindTables(ctx, pool, schema)
	if err != nil || len(found) != 1 || found[0].Table != hostile {
		t.Fatalf("FindTables: %+v, %v; want the one table", found, err)
	}
	if st, err := store.Status(ctx); err != nil || len(st) != 0 {
		t.Errorf("Status of an empty table: %+v, %v", st, err)
	}
	if n := pgtest.QueryInt(t, pool, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", schema); n != 1 {
		t.Fatal("the schema is gone: a name was read as SQL")
	}
}
