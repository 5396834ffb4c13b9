package reliability

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
)

// consumerConfig is everything a consumer needs to join a scenario, in or
// out of the test's process: it travels to a subprocess as JSON.
type consumerConfig struct {
	Brokers       []string
	Schema        string // holds the store, the ledger and the outbox
	Topic         string
	Group         string
	Transactional bool   // the transactional mode of Idempotency, else check-handle-mark
	Events        string // with Transactional: the topic of one event per message, through the outbox
	Trace         bool   // write "b <uuid>" and "e <uuid>" lines around each delivery
	Concurrency   int    // the subscriber's Config.Concurrency
	Chaos         bool   // handlers wait 0–2 ms and fail 2 % of first deliveries (see chaos)
	Parking       bool   // with Transactional: park failing messages (see parkingConsumer)
	ParkFailures  bool   // with Parking: fail the attempts parkFailures names
	Name          string // names the consumer to the holds
	Open          int    // the holds below it are open at the start (see holds)
}

// ledgerTable is the table in which the handler records each message it
// handles. It has no unique constraint: a duplicate effect is a second row.
const ledgerTable = "ledger"

// consumer is a running router with the project's middleware chain, the
// consumer under test.
type consumer struct {
	router *message.Router
	chain  *middleware.Chain
	store  *postgres.Store
	dlq    message.Publisher // the chain's dead letters; the router does not close it
	done   chan error
}

// maxAttempts is the dead-letter middleware's MaxAttempts: were an
// outage taken for an error, a delivery would be dead-lettered after it.
const maxAttempts = 3

// sessionTimeout is the consumer group session and rebalance timeout:
// short, so that the group notices a killed member quickly (in a
// rebalance, the broker waits for a member that does not rejoin for the
// rebalance timeout, 60 s by default).
const sessionTimeout = 3 * time.Second

// brokerConfig is the configuration of a scenario's clients.
func brokerConfig(brokers []string, group string) broker.Config {
	return broker.Config{
		Brokers:         brokers,
		ConsumerGroup:   group,
		NackResendSleep: 10 * time.Millisecond,
		Sarama: func(c *sarama.Config) {
			c.Consumer.Group.Session.Timeout = sessionTimeout
			c.Consumer.Group.Rebalance.Timeout = sessionTimeout
			c.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
		},
	}
}

// startConsumer runs a consumer of cfg on pool until stop. trace receives
// the Trace lines; logger the chain's warnings; h, when not nil, holds the
// deliveries of marked messages.
func startConsumer(pool *pgxpool.Pool, cfg consumerConfig, h *holds, trace io.Writer, logger *slog.Logger) (*consumer, error) {
	store, err := postgres.NewStore(pool, postgres.Config{Schema: cfg.Schema, CleanupInterval: -1})
	if err != nil {
		return nil, err
	}
	c := &consumer{store: store, done: make(chan error, 1)}
	if err := c.build(pool, cfg, h, trace, logger); err != nil {
		_ = store.Close()
		return nil, err
	}
	go func() { c.done <- c.router.Run(context.Background()) }()
	select {
	case <-c.router.Running():
		return c, nil
	case err := <-c.done:
		c.done <- err
		return nil, errors.Join(fmt.Errorf("router stopped at start: %w", err), c.stop())
	}
}

func (c *consumer) build(pool *pgxpool.Pool, cfg consumerConfig, holds *holds, trace io.Writer, logger *slog.Logger) error {
	bcfg := brokerConfig(cfg.Brokers, cfg.Group)
	bcfg.Concurrency = cfg.Concurrency
	dlq, err := broker.NewPublisher(bcfg)
	if err != nil {
		return err
	}
	idem := middleware.IdempotencyConfig{
		Transactional: cfg.Transactional,
		MarkBackoff:   koto.Backoff{InitialInterval: 10 * time.Millisecond, MaxInterval: 200 * time.Millisecond},
	}
	var box *outbox.Outbox
	if cfg.Events != "" || cfg.Parking {
		if box, err = outbox.New(pool, outbox.Config{Schema: cfg.Schema}); err != nil {
			return errors.Join(err, dlq.Close())
		}
	}
	if cfg.Events != "" {
		idem.Outbox = box.ContextPublisher()
	}
	dl := middleware.DeadLetterConfig{
		MaxAttempts: maxAttempts,
		Backoff:     koto.Backoff{InitialInterval: 10 * time.Millisecond, MaxInterval: 200 * time.Millisecond},
	}
	handle := handler(pool, cfg, box, holds)
	if cfg.Parking {
		if dl, handle, err = parkingConsumer(pool, cfg, box, dl); err != nil {
			return errors.Join(err, dlq.Close())
		}
	}
	c.chain, err = middleware.Defaults(middleware.Config{
		Publisher:   dlq,
		Store:       c.store,
		Logger:      logger,
		Idempotency: idem,
		DeadLetter:  dl,
	})
	if err != nil {
		return errors.Join(err, dlq.Close())
	}
	sub, err := broker.NewSubscriber(bcfg)
	if err != nil {
		return errors.Join(err, dlq.Close())
	}
	c.router, err = message.NewRouter(message.RouterConfig{CloseTimeout: 30 * time.Second}, watermill.NewSlogLogger(logger))
	if err != nil {
		return errors.Join(err, dlq.Close(), sub.Close())
	}
	h := c.router.AddConsumerHandler(cfg.Group, cfg.Topic, sub, handle)
	if cfg.Trace {
		h.AddMiddleware(traced(trace))
	}
	faults := newChaos()
	if cfg.Chaos {
		h.AddMiddleware(faults.nackFirst)
	}
	h.AddMiddleware(c.chain.Middlewares()...)
	if cfg.Chaos {
		h.AddMiddleware(faults.failFirst)
	}
	c.dlq = dlq
	return nil
}

// stop closes the router, then the chain, then the store.
func (c *consumer) stop() error {
	var errs []error
	if c.router != nil {
		errs = append(errs, c.router.Close(), <-c.done)
	}
	if c.chain != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		errs = append(errs, c.chain.Close(ctx))
	}
	if c.dlq != nil {
		errs = append(errs, c.dlq.Close())
	}
	errs = append(errs, c.store.Close())
	return errors.Join(errs...)
}

// handler records msg in the ledger, waiting for its hold, if it has one,
// before or after. In the transactional mode the row is written in the
// middleware's transaction, with the claim, and so is the event, through
// the outbox; in check-handle-mark it is written on its own, before the
// mark.
func handler(pool *pgxpool.Pool, cfg consumerConfig, box *outbox.Outbox, h *holds) message.NoPublishHandlerFunc {
	effect := ledgerEffect(pool, cfg, box)
	return func(msg *message.Message) error {
		if err := h.wait(beforeEffect, cfg.Name, msg); err != nil {
			return err
		}
		if err := effect(msg); err != nil {
			return err
		}
		return h.wait(afterEffect, cfg.Name, msg)
	}
}

// ledgerEffect writes msg's ledger row, and its event in the
// transactional mode with Events.
func ledgerEffect(pool *pgxpool.Pool, cfg consumerConfig, box *outbox.Outbox) message.NoPublishHandlerFunc {
	insert := "INSERT INTO " + cfg.Schema + "." + ledgerTable + " (message_uuid) VALUES ($1)"
	return func(msg *message.Message) error {
		ctx := msg.Context()
		if !cfg.Transactional {
			_, err := pool.Exec(ctx, insert, msg.UUID)
			return err
		}
		tx, ok := postgres.TxFromContext(ctx)
		if !ok {
			return koto.Poison(errors.New("no transaction in the handler's context"))
		}
		if _, err := tx.Exec(ctx, insert, msg.UUID); err != nil {
			return err
		}
		if box == nil {
			return nil
		}
		event := message.NewMessage(uuid.Must(uuid.NewV7()).String(), []byte(msg.UUID))
		event.SetContext(ctx)
		return box.ContextPublisher().Publish(cfg.Events, event)
	}
}

// traced writes a line when a delivery enters the chain and another when
// it leaves it, marked or not: the deliveries in flight when a process is
// killed are those with the first line and not the second.
func traced(w io.Writer) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			fmt.Fprintf(w, "b %s\n", msg.UUID)
			out, err := h(msg)
			fmt.Fprintf(w, "e %s\n", msg.UUID)
			return out, err
		}
	}
}

// runConsumer runs a consumer of cfg on pool in the test's process, its
// marked deliveries held by h (nil: none), its Trace lines written to
// trace (nil: none), and returns a function that stops it; the test's
// cleanup calls it too.
func runConsumer(t *testing.T, pool *pgxpool.Pool, cfg consumerConfig, h *holds, trace io.Writer, logger *slog.Logger) (stop func()) {
	t.Helper()
	if trace == nil {
		trace = io.Discard
	}
	c, err := startConsumer(pool, cfg, h, trace, logger)
	if err != nil {
		t.Fatalf("start consumer: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := c.stop(); err != nil {
				t.Errorf("stop consumer: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	if h != nil {
		t.Cleanup(h.openAll) // before stop: no held delivery keeps it waiting
	}
	return stop
}

// traceCounter counts, by UUID, the deliveries in the Trace lines written
// to it, one line a Write.
type traceCounter struct{ *kototest.Counter }

func (c traceCounter) Write(p []byte) (int, error) {
	if id, ok := strings.CutPrefix(strings.TrimSpace(string(p)), "b "); ok {
		c.Add(id)
	}
	return len(p), nil
}
