package middleware

import (
	"context"
	"strconv"

	koto "github.com/koto-dev/watermill-koto"
)

// position is where a message was read from, as far as the subscriber told
// the message context (koto.Position). Partition and offset are only known
// for Kafka.
type position struct {
	koto.Position
	kafka bool
}

func positionFrom(ctx context.Context, topic string) position {
	p, ok := koto.PositionFromContext(ctx)
	if p.Topic == "" {
		p.Topic = topic
	}
	return position{Position: p, kafka: ok}
}

func (p position) partitionString() string {
	if !p.kafka {
		return ""
	}
	return strconv.FormatInt(int64(p.Partition), 10)
}

func (p position) offsetString() string {
	if !p.kafka {
		return ""
	}
	return strconv.FormatInt(p.Offset, 10)
}
