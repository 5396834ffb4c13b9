package pgschema

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Querier is what a check needs of a pool, a connection or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Beginner begins transactions: a pool or a connection.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Objects is a schema and the tables a component keeps in it, with the DDL
// that creates them. Names are quoted (see QuoteIdent); tables are
// qualified with the schema.
type Objects struct {
	Schema    string   // the schema, quoted
	Tables    []string // every table, schema.table, quoted; the first names the table lock
	SchemaDDL string   // creates the schema if it does not exist
	TablesDDL string   // creates the tables and their indexes if they do not exist
}

// Exist reports whether every table exists.
func (o Objects) Exist(ctx context.Context, q Querier) (bool, error) {
	for _, table := range o.Tables {
		var exists bool
		if err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists); err != nil || !exists {
			return false, err
		}
	}
	return true, nil
}

// Create creates the schema, then the tables, each in a transaction of its
// own under an advisory lock on its name. Whatever exists already is left
// alone and costs no DDL, so Create needs no CREATE privilege on a
// database whose objects exist.
func (o Objects) Create(ctx context.Context, db Beginner) error {
	if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return o.createSchema(ctx, tx) }); err != nil {
		return fmt.Errorf("create schema %s: %w", o.Schema, err)
	}
	if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return o.createTables(ctx, tx) }); err != nil {
		return fmt.Errorf("create table %s: %w", o.Tables[0], err)
	}
	return nil
}

// createSchema locks on the schema's name, so that components of
// different tables in one new schema do not race on it.
func (o Objects) createSchema(ctx context.Context, tx pgx.Tx) error {
	if err := XactLock(ctx, tx, ClassSchema, o.Schema); err != nil {
		return err
	}
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT to_regnamespace($1) IS NOT NULL", o.Schema).Scan(&exists); err != nil || exists {
		return err
	}
	_, err := tx.Exec(ctx, o.SchemaDDL)
	return err
}

func (o Objects) createTables(ctx context.Context, tx pgx.Tx) error {
	if err := XactLock(ctx, tx, ClassTable, o.Tables[0]); err != nil {
		return err
	}
	if exists, err := o.Exist(ctx, tx); err != nil || exists {
		return err
	}
	_, err := tx.Exec(ctx, o.TablesDDL)
	return err
}
