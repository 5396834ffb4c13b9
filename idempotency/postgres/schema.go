package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// EnsureSchema creates the schema, table and index now, or, with
// DisableAutoCreateSchema, checks that the table exists, instead of waiting
// for the first call that needs them. Once it has succeeded it costs
// nothing; after a failure the next call tries again.
func (s *Store) EnsureSchema(ctx context.Context) error { return s.ensure(ctx) }

// ensure makes sure the table exists, once per Store. One goroutine at a
// time does the work; a failure is not remembered.
func (s *Store) ensure(ctx context.Context) error {
	if s.ready.Load() {
		return nil
	}
	select {
	case s.setup <- struct{}{}:
	case <-ctx.Done():
		return unavailable("prepare table", ctx.Err())
	}
	defer func() { <-s.setup }()
	if s.ready.Load() {
		return nil
	}
	if err := s.prepareTable(ctx); err != nil {
		return err
	}
	s.ready.Store(true)
	return nil
}

// prepareTable checks that the table exists and creates it when it does
// not, unless creation is disabled.
func (s *Store) prepareTable(ctx context.Context) error {
	exists, err := s.tableExists(ctx, s.pool)
	switch {
	case err != nil:
		return unavailable("check table", err)
	case exists:
		return nil
	case s.cfg.DisableAutoCreateSchema:
		return fmt.Errorf("%w: table %s does not exist and DisableAutoCreateSchema is set; "+
			"create it in your migrations with the DDL from postgres.SchemaSQL, or unset DisableAutoCreateSchema",
			ErrSchemaMissing, s.sql.qualified)
	}
	if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.createSchema(ctx, tx) }); err != nil {
		return unavailable("create schema", err)
	}
	if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.createTable(ctx, tx) }); err != nil {
		return unavailable("create table", err)
	}
	return nil
}

// createSchema creates the schema under an advisory lock on its name, so
// that stores of different tables in one new schema do not race on it.
// When the schema exists it runs no DDL, which needs no CREATE privilege.
func (s *Store) createSchema(ctx context.Context, tx pgx.Tx) error {
	if err := lock(ctx, tx, lockClassSchema, s.sql.schemaName); err != nil {
		return err
	}
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT to_regnamespace($1) IS NOT NULL", s.sql.schemaName).Scan(&exists); err != nil || exists {
		return err
	}
	_, err := tx.Exec(ctx, s.sql.createSch)
	return err
}

// createTable creates the table and its index under an advisory lock on
// the table's name, so that instances starting together do not race on
// CREATE ... IF NOT EXISTS.
func (s *Store) createTable(ctx context.Context, tx pgx.Tx) error {
	if err := lock(ctx, tx, lockClassTable, s.sql.qualified); err != nil {
		return err
	}
	if exists, err := s.tableExists(ctx, tx); err != nil || exists {
		return err
	}
	_, err := tx.Exec(ctx, s.sql.createTable)
	return err
}

// querier is what tableExists needs of a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (s *Store) tableExists(ctx context.Context, q querier) (bool, error) {
	var exists bool
	err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", s.sql.qualified).Scan(&exists)
	return exists, err
}

// lock takes a transaction-scoped advisory lock on (class, name).
func lock(ctx context.Context, tx pgx.Tx, class int32, name string) error {
	_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::int4, $2::int4)", class, lockObject(name))
	return err
}
