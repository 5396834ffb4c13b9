package middleware

import (
	"context"
	"strconv"

	koto "github.com/koto-dev/watermill-koto"
)

// position is where a message was read from, as far as the subscriber told
// the message context. Partition and offset are only known for Kafka.
type position struct {
	topic     string
	partition int32
	offset    int64
	kafka     bool
}

func positionFrom(ctx context.Context, topic string) position {
	p := position{topic: topic}
	if pos, ok := koto.PositionFromContext(ctx); ok {
		p.partition, p.offset, p.kafka = pos.Partition, pos.Offset, true
	}
	return p
}

func (p position) partitionString() string {
	if !p.kafka {
		return ""
	}
	return strconv.FormatInt(int64(p.partition), 10)
}

func (p position) offsetString() string {
	if !p.kafka {
		return ""
	}
	return strconv.FormatInt(p.offset, 10)
}
