package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
)

// E2EPartitions is the partition count of the end-to-end benchmark's
// topics, as in the reference figures.
const E2EPartitions = 4

// E2E is the end-to-end consumer benchmark: a Kafka topic of
// E2EPartitions partitions filled beforehand, consumed by a Watermill
// router through the broker package's subscriber, middleware.Defaults
// (with the idempotency of the variant, if any) and a handler. Every run
// gets a topic and a consumer group of its own, so runs do not see each
// other's messages or marks; they share one PostgreSQL schema with the
// idempotency store and the table the handlers write to.
//
// Make one with NewE2E, Start runs on it, and Close it when done.
type E2E struct {
	brokers []string
	pool    *pgxpool.Pool
	prefix  string
	schema  string
	table   string // the handlers' table, quoted
	store   *postgres.Store
	remote  *remoteDB         // the same database a hop away, once SetRemote was called
	own     *remoteDB         // the same database through the small pool of the store of OwnStorePool variants
	pub     *broker.Publisher // for dead letters; none are expected
	runs    atomic.Int64      // numbers the runs' topics and groups
	cpuMu   sync.Mutex
	cpu     map[string]CPU // by variant, what E2E.Run measured
	sdk     *sdkTelemetry  // for the variants with Telemetry
}

// NewE2E sets the benchmark up on the Kafka brokers and PostgreSQL pool,
// under names that start with prefix (a lower-case identifier; a fresh
// prefix per set-up keeps runs on shared servers apart). It creates the
// schema prefix, with the store's table and the handlers' table, which
// Close drops. Size pool for E2EPartitions transactions at once and the
// store's own use: E2EPartitions+2 connections or more.
func NewE2E(ctx context.Context, brokers []string, pool *pgxpool.Pool, prefix string) (_ *E2E, err error) {
	e := &E2E{brokers: brokers, pool: pool, prefix: prefix, schema: prefix, cpu: map[string]CPU{},
		table: pgx.Identifier{prefix, "effects"}.Sanitize()}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{prefix}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create schema %s: %w", prefix, err)
	}
	defer func() {
		if err != nil {
			_ = e.Close()
		}
	}()
	_, err = pool.Exec(ctx, "CREATE TABLE "+e.table+
		" (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, message_uuid text NOT NULL, payload bytea NOT NULL)")
	if err != nil {
		return nil, fmt.Errorf("create table %s: %w", e.table, err)
	}
	if e.store, err = postgres.NewStore(pool, postgres.Config{Schema: prefix, CleanupInterval: -1}); err != nil {
		return nil, err
	}
	if err := e.store.EnsureSchema(ctx); err != nil {
		return nil, err
	}
	if e.own, err = ownStore(pool, prefix); err != nil {
		return nil, err
	}
	if e.sdk, err = newSDKTelemetry(); err != nil {
		return nil, err
	}
	if e.pub, err = broker.NewPublisher(broker.Config{Brokers: brokers}); err != nil {
		return nil, err
	}
	return e, nil
}

// Close stops the store, closes the publisher and drops the schema. The
// pool stays open.
func (e *E2E) Close() error {
	var errs []error
	if e.store != nil {
		errs = append(errs, e.store.Close())
	}
	if e.remote != nil {
		errs = append(errs, e.remote.store.Close())
	}
	if e.own != nil {
		errs = append(errs, e.own.store.Close())
		e.own.pool.Close()
	}
	if e.pub != nil {
		errs = append(errs, e.pub.Close())
	}
	if e.sdk != nil {
		errs = append(errs, e.sdk.Close())
	}
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{e.schema}.Sanitize()+" CASCADE"); err != nil {
		errs = append(errs, fmt.Errorf("drop schema %s: %w", e.schema, err))
	}
	return errors.Join(errs...)
}

// Rows returns how many rows the handlers have written so far.
func (e *E2E) Rows(ctx context.Context) (int64, error) {
	var n int64
	err := e.pool.QueryRow(ctx, "SELECT count(*) FROM "+e.table).Scan(&n)
	return n, err
}
