package parking

import (
	"encoding/json"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/middleware"
)

// Entry is a parked message as the table holds it.
type Entry struct {
	middleware.Parked
	// Seq orders the messages of a queue: the first comes back first.
	Seq int64
	// ParkedAt is when it was first parked.
	ParkedAt time.Time
}

// LastError is the error of the last delivery that parked it; empty for a
// message parked behind its key's without a delivery of its own.
func (e Entry) LastError() string {
	if len(e.History) == 0 {
		return ""
	}
	return e.History[len(e.History)-1].Error
}

// selectEntry is the columns scanEntry reads, and FROM.
const selectEntry = `SELECT id, consumer_group, topic, "partition", key, "offset", message_uuid, payload, metadata,
    parkings, history, due_at, dead_letter, seq, parked_at FROM `

func scanEntry(row pgx.CollectableRow) (Entry, error) {
	var (
		e        Entry
		uuid     string
		payload  []byte
		metadata map[string]string
		history  []byte
		due      *time.Time
	)
	err := row.Scan(&e.ID, &e.Group, &e.Position.Topic, &e.Position.Partition, &e.Position.Key, &e.Position.Offset,
		&uuid, &payload, &metadata, &e.Parkings, &history, &due, &e.DeadLetter, &e.Seq, &e.ParkedAt)
	if err != nil {
		return e, err
	}
	e.Message = message.NewMessage(uuid, payload)
	if metadata != nil {
		e.Message.Metadata = metadata
	}
	if due != nil {
		e.DueAt = *due
	}
	return e, json.Unmarshal(history, &e.History)
}
