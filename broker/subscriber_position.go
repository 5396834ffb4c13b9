package broker

import (
	"context"

	"github.com/IBM/sarama"
)

// withPosition adds to ctx where rec was read from.
func withPosition(ctx context.Context, rec *sarama.ConsumerMessage) context.Context {
	return ctx
}
