package postgres

import (
	"context"
	"fmt"

	"github.com/koto-dev/watermill-koto/internal/pgschema"
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
	objs := s.objects()
	exists, err := objs.Exist(ctx, s.pool)
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
	if err := objs.Create(ctx, s.pool); err != nil {
		return unavailable("prepare table", err)
	}
	return nil
}

// objects describes the store's schema and table for pgschema, which
// creates them under advisory locks.
func (s *Store) objects() pgschema.Objects {
	return pgschema.Objects{
		Schema:    s.sql.schemaName,
		Tables:    []string{s.sql.qualified},
		SchemaDDL: s.sql.createSch,
		TablesDDL: s.sql.createTable,
	}
}
