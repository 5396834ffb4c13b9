package middleware

import (
	"context"
	"errors"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/internal/config"
)

// Metadata keys of a parked message's redelivery: the parked entry it
// brings back, and the consumer group it is for. Other groups consuming
// the topic skip it; a dead letter leaves them out.
const (
	ParkedIDKey    = "koto_parked_id"
	ParkedGroupKey = "koto_parked_group"
)

// ParkingConfig configures the parking of [DeadLetter]: later attempts, at
// growing delays, of a message whose attempts in place failed (see
// Parking in the package doc). The zero value parks nothing.
type ParkingConfig struct {
	// Store keeps the parked messages and brings each back at its time;
	// parking.Store is PostgreSQL's. Required with Delays.
	Store ParkingStore
	// Delays are the waits before the later attempts: a message whose
	// attempts in place failed with a retryable error is parked for
	// Delays[0], and each time it fails again for the next, until they
	// run out and it is dead-lettered, for example 1m, 5m, 30m, 2h. Empty
	// parks nothing.
	Delays []time.Duration
}

// enabled reports whether c parks.
func (c ParkingConfig) enabled() bool { return len(c.Delays) > 0 }

func (c ParkingConfig) validate(p *config.Problems) {
	if c.enabled() && c.Store == nil {
		p.Add("Parking.Store", "is nil but Parking.Delays are set; set it to a parking.Store, or leave Delays empty")
	}
	for i, d := range c.Delays {
		if d < 0 {
			p.Add("Parking.Delays", "[%d] is negative (%v); give each later attempt a delay of zero or more", i, d)
		}
	}
}

// ParkingStore keeps the messages that [DeadLetter] parks, in queues of
// one consumer group's partition key (see Parking in the package doc), and
// brings each queue's first back through its topic at its time, with the
// metadata keys ParkedIDKey and ParkedGroupKey. parking.Store implements
// it on PostgreSQL and the outbox's schedule. DeadLetter retries its
// errors in place, as outages, but for a poison one (koto.Poison): the
// message cannot be parked, and DeadLetter dead-letters it, saying why.
type ParkingStore interface {
	// ParkedKeys returns the record keys of topic's partition that have
	// messages parked for group.
	ParkedKeys(ctx context.Context, group, topic string, partition int32) ([][]byte, error)
	// Park parks p: a new entry last in its key's queue, brought back at
	// p.DueAt when it is the first, or an entry brought back and failed
	// again (p.Parkings above 1), brought back at p.DueAt again. A new
	// entry whose consumed record, by partition and offset, is parked
	// already is not parked twice.
	Park(ctx context.Context, p *Parked) error
	// ParkBehind parks p last in its key's queue, to wait there without a
	// time of its own, if the key has parked messages; parked says
	// whether it did, or found the record parked already.
	ParkBehind(ctx context.Context, p *Parked) (parked bool, err error)
	// Load returns the parked entry id, or ok false when it is no longer
	// parked.
	Load(ctx context.Context, group, id string) (p *Parked, ok bool, err error)
	// Release removes the entry p and brings its key's next one back now.
	Release(ctx context.Context, p *Parked) error
}

// Parked is a message that DeadLetter parked, as a [ParkingStore] keeps it.
type Parked struct {
	// ID names the entry; DeadLetter gives a new one a UUIDv7.
	ID string
	// Group is the consumer group it was parked for.
	Group string
	// Position is where it was consumed from first: its topic, partition,
	// offset and record key.
	Position koto.Position
	// Message is what is brought back: the consumed message with its
	// UUID, payload and metadata, ParkedIDKey and ParkedGroupKey
	// included.
	Message *message.Message
	// Parkings is how many times it was parked: the delays used.
	Parkings int
	// History is each delivery that failed and parked it, oldest first.
	History []ParkedAttempt
	// DueAt is when it is brought back; zero while it waits behind
	// another message of its key.
	DueAt time.Time
	// DeadLetter is set when an operator asked for its dead letter: it is
	// dead-lettered when it is brought back, without a handler call.
	DeadLetter bool
}

// ParkedAttempt is one delivery of a parked message that failed.
type ParkedAttempt struct {
	FailedAt time.Time `json:"failed_at"`
	// Attempts is how many times the handler ran in that delivery.
	Attempts int    `json:"attempts"`
	Error    string `json:"error"`
	// RetryAt is when the message was to be brought back.
	RetryAt time.Time `json:"retry_at"`
}

// ErrDeadLetterRequested is the cause of the dead letter of a parked
// message that an operator dead-lettered (Parked.DeadLetter).
var ErrDeadLetterRequested = errors.New("middleware: dead-lettered by an operator while parked")
