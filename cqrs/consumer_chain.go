package cqrs

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/middleware"
)

// closer is a middleware chain that a Service closes.
type closer interface {
	Close(ctx context.Context) error
}

// consumerChain is the middleware of one registered consumer: a
// middleware.Defaults chain, or for a batch consumer a
// middleware.BatchDefaults one.
type consumerChain struct {
	middlewares []message.HandlerMiddleware
	closer      closer
	batches     *middleware.BatchChain // a batch consumer's
}

func newConsumerChain(cfg middleware.Config, p consumerPlan) (consumerChain, error) {
	if p.batch == nil {
		c, err := middleware.Defaults(cfg)
		if err != nil {
			return consumerChain{}, err
		}
		return consumerChain{middlewares: c.Middlewares(), closer: c}, nil
	}
	c, err := middleware.BatchDefaults(cfg, *p.batch)
	if err != nil {
		return consumerChain{}, err
	}
	return consumerChain{middlewares: c.Middlewares(), closer: c, batches: c}, nil
}

// handler is the router handler function of spec's consumer.
func (c consumerChain) handler(spec *consumerSpec, env *handlerEnv) message.NoPublishHandlerFunc {
	if c.batches == nil {
		return func(msg *message.Message) error { return spec.handle(msg, env) }
	}
	batch := c.batches.Handler(spec.handleBatch)
	return func(msg *message.Message) error {
		if skip, err := spec.prepare(msg, env); skip || err != nil {
			return err
		}
		return batch(msg)
	}
}

// planBatch checks a batch consumer's settings and sets their defaults.
func (p *consumerPlan) planBatch() error {
	cfg := p.spec.opts.batch
	switch {
	case !p.spec.batched() && cfg != nil:
		return fmt.Errorf("%w: %s consumer of %s: WithBatch applies to batch consumers (NewBatchEventConsumer)", koto.ErrInvalidConfig, p.spec.kind, p.spec.typeName)
	case !p.spec.batched():
		return nil
	}
	b := middleware.BatchConfig{}
	if cfg != nil {
		b = *cfg
	}
	if err := b.Validate(); err != nil {
		return err
	}
	b = b.WithDefaults()
	p.batch = &b
	return nil
}
