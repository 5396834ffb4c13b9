package idempotency

import (
	"crypto/sha1"

	"github.com/google/uuid"
)

// namespace is the UUIDv5 namespace of KeyUUID:
// 3c1b8f5e-2d0a-5b8e-9a41-6b0f3c6d7e21. It is part of the stored format and
// never changes: changing it would make every stored mark unreachable.
var namespace = uuid.MustParse("3c1b8f5e-2d0a-5b8e-9a41-6b0f3c6d7e21")

// KeyUUID maps a key to the UUID a store persists. A key that is a UUID in
// its canonical 36-character form (any case) maps to itself, so Watermill
// message UUIDs are stored as they are; any other string maps to the UUIDv5
// of the key under the fixed namespace 3c1b8f5e-2d0a-5b8e-9a41-6b0f3c6d7e21,
// which never changes: it is part of the stored format.
func KeyUUID(key string) uuid.UUID {
	if len(key) == 36 {
		if id, err := uuid.Parse(key); err == nil {
			return id
		}
	}
	// uuid.NewSHA1, without its allocations: a consumer hashes each
	// message's scoped key on every check, mark and claim.
	var buf [128]byte
	sum := sha1.Sum(append(append(buf[:0], namespace[:]...), key...))
	var id uuid.UUID
	copy(id[:], sum[:])
	id[6] = id[6]&0x0f | 5<<4 // version 5
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return id
}

// ScopedKey returns the key a consumer with the given scope stores for a
// message key: scope + "/" + key, or the bare key when scope is empty.
func ScopedKey(scope, key string) string {
	if scope == "" {
		return key
	}
	return scope + "/" + key
}
