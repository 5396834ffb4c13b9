package pgschema_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/internal/pgschema"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

func objects(schema string) pgschema.Objects {
	s := pgschema.QuoteIdent(schema)
	return pgschema.Objects{
		Schema:    s,
		Tables:    []string{s + ".a", s + `."B"`},
		SchemaDDL: "CREATE SCHEMA IF NOT EXISTS " + s,
		TablesDDL: "CREATE TABLE IF NOT EXISTS " + s + ".a (id int);\nCREATE TABLE IF NOT EXISTS " + s + `."B" (id int);`,
	}
}

// TestCreateConcurrently creates one schema's tables from ten goroutines at
// once: none fails, and afterwards they all exist.
func TestCreateConcurrently(t *testing.T) {
	t.Parallel()
	cfg := pgtest.Config(t)
	cfg.MaxConns = 12
	pool := pgtest.PoolWith(t, cfg)
	schema := pgtest.Name("koto_test")
	t.Cleanup(func() { pgtest.DropSchema(t, pool, schema) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	objs := objects(schema)
	if exist, err := objs.Exist(ctx, pool); err != nil || exist {
		t.Fatalf("Exist before Create = %v, %v; want false", exist, err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Go(func() { errs <- objs.Create(ctx, pool) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
	}
	if exist, err := objs.Exist(ctx, pool); err != nil || !exist {
		t.Fatalf("Exist after Create = %v, %v; want true", exist, err)
	}
}

// TestExistNeedsEveryTable: one table of two missing means not there.
func TestExistNeedsEveryTable(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+schema+".a (id int)"); err != nil {
		t.Fatal(err)
	}
	if exist, err := objects(schema).Exist(ctx, pool); err != nil || exist {
		t.Fatalf("Exist with one table of two = %v, %v; want false", exist, err)
	}
}
