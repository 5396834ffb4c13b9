package pgschema

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// UndefinedTable reports whether err is PostgreSQL's undefined_table
// (42P01): a statement named a table that does not exist.
func UndefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}
