package postgres

import (
	"errors"
	"fmt"

	"github.com/koto-dev/watermill-koto/idempotency"
)

// ErrInvalidConfig is wrapped by every error NewStore and Config.Validate
// return for a configuration they refuse. The message names the field and
// says what to change.
var ErrInvalidConfig = errors.New("postgres: invalid configuration")

// ErrSchemaMissing is returned, wrapped, when DisableAutoCreateSchema is set
// and the table does not exist. The message names the table and points at
// SchemaSQL. The check runs again on the next call, so the store works as
// soon as the table is created.
var ErrSchemaMissing = errors.New("postgres: idempotency table missing")

// ErrCleanupBusy is returned by Cleanup when another Store, in this process
// or another, is cleaning the same table. That pass deleted nothing; the
// other one does the work.
var ErrCleanupBusy = errors.New("postgres: idempotency cleanup already running")

// unavailable wraps an error of PostgreSQL so that callers can test it with
// errors.Is against idempotency.ErrStoreUnavailable and against the
// original error.
func unavailable(op string, err error) error {
	return fmt.Errorf("%w: postgres %s: %w", idempotency.ErrStoreUnavailable, op, err)
}
