package postgres

import (
	"errors"
	"fmt"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/idempotency"
)

// ErrSchemaMissing is returned, wrapped, when DisableAutoCreateSchema is set
// and the table does not exist. The message names the table and points at
// SchemaSQL. The check runs again on the next call, so the store works as
// soon as the table is created.
var ErrSchemaMissing = errors.New("postgres: idempotency table missing")

// ErrCleanupBusy is returned by Cleanup when another Store, in this process
// or another, is cleaning the same table. That pass deleted nothing; the
// other one does the work.
var ErrCleanupBusy = errors.New("postgres: idempotency cleanup already running")

// unavailable wraps an error of PostgreSQL as an outage that callers can
// test with errors.Is against idempotency.ErrStoreUnavailable and against
// the original error.
func unavailable(op string, err error) error {
	return koto.Outage(fmt.Errorf("%w: postgres %s: %w", idempotency.ErrStoreUnavailable, op, err))
}
