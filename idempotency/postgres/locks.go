package postgres

import "github.com/koto-dev/watermill-koto/internal/pgschema"

// lockClassCleanup is the advisory lock class of a table's cleanup; its
// object is lockObject of the quoted schema.table, so that different
// tables never wait for each other.
const lockClassCleanup = pgschema.ClassCleanup

// lockObject hashes a quoted name into the object half of a lock key.
func lockObject(name string) int32 { return pgschema.LockObject(name) }
