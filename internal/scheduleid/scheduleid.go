// Package scheduleid is the layout of an outbox's schedule that package
// outbox writes and kototest's clock moves: the tables beside the outbox
// table, and the due time at the front of a schedule ID.
package scheduleid

import (
	"encoding/binary"

	"github.com/google/uuid"
)

// Suffixes of the schedule's tables beside the outbox table: the messages
// scheduled and not yet due (<Table>_scheduled), and what became of those
// sent or cancelled (<Table>_settled).
const (
	ScheduledSuffix = "_scheduled"
	SettledSuffix   = "_settled"
)

// MaxMillis is the latest due time a schedule ID holds: 48 bits of
// milliseconds since 1970, in the year 10889.
const MaxMillis = 1<<48 - 1

// Millis returns the due time id holds, in milliseconds since 1970.
func Millis(id uuid.UUID) int64 {
	var b [8]byte
	copy(b[2:], id[:6])
	return int64(binary.BigEndian.Uint64(b[:]))
}

// SetMillis writes ms, held within 0 and [MaxMillis], into the first 48
// bits of id.
func SetMillis(id *uuid.UUID, ms int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(min(max(ms, 0), MaxMillis)))
	copy(id[:6], b[2:])
}
