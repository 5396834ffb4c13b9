package postgres

import "hash/fnv"

// Advisory locks are taken with two int4 keys, (class, object); PostgreSQL
// keeps that key space apart from single-bigint advisory locks. The class
// says what is locked, the object is a hash of the quoted schema or
// schema.table, so different tables never wait for each other.
const (
	lockClassSchema  int32 = 0x6b6f7401 // creating a schema
	lockClassTable   int32 = 0x6b6f7402 // creating a table and its index
	lockClassCleanup int32 = 0x6b6f7403 // cleaning a table
)

// lockObject hashes a quoted name into the object half of a lock key.
func lockObject(name string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int32(h.Sum32())
}
