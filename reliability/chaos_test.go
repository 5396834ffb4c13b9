package reliability

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// chaos makes handlers slow and failing: each waits 0–2 ms; 2 % of the
// messages fail their first delivery before the chain (the router nacks
// them, and the subscriber delivers them again), and 2 % fail their first
// attempt after the handler wrote its effect (the transaction rolls back,
// and the dead-letter middleware tries again).
type chaos struct {
	mu     sync.Mutex
	nacked map[string]bool
	failed map[string]bool
}

var errChaos = errors.New("chaos: first attempt fails")

func newChaos() *chaos { return &chaos{nacked: map[string]bool{}, failed: map[string]bool{}} }

// first reports whether this is the first time seen meets uuid, and
// records it.
func (c *chaos) first(seen map[string]bool, uuid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if seen[uuid] {
		return false
	}
	seen[uuid] = true
	return true
}

func (c *chaos) nackFirst(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		if c.first(c.nacked, msg.UUID) && rand.N(50) == 0 {
			return nil, errChaos
		}
		return h(msg)
	}
}

func (c *chaos) failFirst(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		time.Sleep(time.Duration(rand.N(2001)) * time.Microsecond)
		out, err := h(msg)
		if err == nil && c.first(c.failed, msg.UUID) && rand.N(50) == 0 {
			return nil, errChaos
		}
		return out, err
	}
}
