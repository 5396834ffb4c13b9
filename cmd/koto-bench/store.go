package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/cmd/koto-bench/internal/benchmarks"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/internal/cli"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// storeTarget is the least ratio to raw pgx that the PostgreSQL store
// must reach.
const storeTarget = 0.9

func storeCommand() command {
	return command{
		summary: "PostgreSQL idempotency store vs raw pgx, check+mark at 1, 4, 16 callers",
		run:     runStore,
	}
}

// storeFlags are the store subcommand's settings.
type storeFlags struct {
	callers   []int
	rounds    int
	benchtime time.Duration
}

func parseStoreFlags(args []string, out io.Writer) (storeFlags, error) {
	fs := cli.NewFlagSet("koto-bench store")
	callers := fs.String("callers", "1,4,16", "comma-separated numbers of concurrent callers")
	rounds := fs.Int("rounds", 4, "benchmark rounds per side and number of callers, alternating which side goes first")
	benchtime := fs.Duration("benchtime", 750*time.Millisecond, "time per benchmark run")
	if err := cli.Parse(fs, out, args); err != nil {
		return storeFlags{}, err
	}
	f := storeFlags{rounds: *rounds, benchtime: *benchtime}
	for _, s := range strings.Split(*callers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return storeFlags{}, cli.Usagef("-callers: %q is not a positive number", s)
		}
		f.callers = append(f.callers, n)
	}
	return f, nil
}

func runStore(ctx context.Context, args []string, out io.Writer) error {
	f, err := parseStoreFlags(args, out)
	if err != nil {
		return err
	}
	results, err := measureStore(ctx, f, out)
	if err != nil {
		return err
	}
	return printStore(out, results)
}

// measureStore runs the comparison and writes what it runs to out.
func measureStore(ctx context.Context, f storeFlags, out io.Writer) ([]benchmarks.StoreResult, error) {
	if err := setBenchtime(f.benchtime); err != nil {
		return nil, err
	}
	pool, cleanup, err := benchPool(ctx, int32(slicesMax(f.callers)))
	if err != nil {
		return nil, err
	}
	defer cleanup()
	schema := pgtest.Name("koto_bench")
	store, err := postgres.NewStore(pool, postgres.Config{Schema: schema, CleanupInterval: -1})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	defer dropSchema(pool, schema)

	fmt.Fprintf(out, "check+mark of new keys (IsProcessed, then MarkProcessed) on %s, pool of %d connections,\n"+
		"%d rounds of %v per side, alternating; raw pgx runs the store's statements on the same pool\n\n",
		store.Table(), pool.Config().MaxConns, f.rounds, f.benchtime)
	return benchmarks.CompareStore(ctx, pool, store, f.callers, f.rounds)
}

// storeFigures gives the store's ratio to raw pgx at each number of
// callers.
func storeFigures(results []benchmarks.StoreResult) []figure {
	figs := make([]figure, 0, len(results))
	for _, r := range results {
		callers := "callers"
		if r.Callers == 1 {
			callers = "caller"
		}
		figs = append(figs, figure{name: fmt.Sprintf("store check+mark, %d %s vs raw pgx", r.Callers, callers),
			value: r.Store, baseline: r.Raw, unit: "ops/s", target: atLeast(storeTarget)})
	}
	return figs
}

func printStore(out io.Writer, results []benchmarks.StoreResult) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "callers\traw ops/s\tstore ops/s\tratio\t")
	for _, r := range results {
		fmt.Fprintf(w, "%d\t%.0f\t%.0f\t%.2f\t\n", r.Callers, r.Raw, r.Store, r.Ratio())
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if r.Ratio() < storeTarget {
			fmt.Fprintf(out, "\nbelow the %.1f target at %d callers\n", storeTarget, r.Callers)
		}
	}
	return nil
}

// benchPool connects to the test database with room for every caller.
func benchPool(ctx context.Context, conns int32) (*pgxpool.Pool, func(), error) {
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		return nil, nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	cfg.MaxConns = max(conns, cfg.MaxConns)
	cfg.ConnConfig.RuntimeParams["application_name"] = benchmarks.ApplicationName
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		return nil, nil, fmt.Errorf("PostgreSQL at %s: %w", pgtest.URL(), err)
	}
	return pool, pool.Close, nil
}

func dropSchema(pool *pgxpool.Pool, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
}

func slicesMax(xs []int) int {
	m := 1
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
