package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
)

// batchSpec is a batch consumer of a scenario, in or out of the test's
// process: it travels to a subprocess as JSON.
type batchSpec struct {
	Brokers []string
	Schema  string // holds the store, the ledger and the outbox
	Topic   string
	Group   string
	CQRS    bool          // a cqrs batch consumer of a DurableOutbox's Service; else a router handler of middleware.BatchDefaults
	Events  string        // the topic of one event per message, published through the outbox in the batch's transaction
	MaxWait time.Duration // BatchConfig.MaxWait; 0: its default
	Holds   []string      // the handler holds a batch with message Holds[k] until hold k opens (see batchHolds)
	Open    int           // the holds below it are open at the start
}

// batchMax is the scenarios' BatchConfig.MaxMessages.
const batchMax = 500

// batchAttempts is the scenarios' DeadLetterConfig.MaxAttempts.
const batchAttempts = 3

// batch is the scenarios' batch subscriber configuration.
func (s batchSpec) batch() broker.BatchConfig {
	return broker.BatchConfig{MaxMessages: batchMax, MaxWait: s.MaxWait}
}

// chainBatch is the scenarios' BatchConfig: short waits out of an outage.
func chainBatch() middleware.BatchConfig {
	return middleware.BatchConfig{Backoff: koto.Backoff{InitialInterval: 20 * time.Millisecond, MaxInterval: 500 * time.Millisecond}}
}

func batchDeadLetters() middleware.DeadLetterConfig {
	return middleware.DeadLetterConfig{
		MaxAttempts: batchAttempts,
		Backoff:     koto.Backoff{InitialInterval: 10 * time.Millisecond, MaxInterval: 100 * time.Millisecond},
	}
}

// batchHooks is what a scenario adds to its consumers' batch handler.
type batchHooks struct {
	// dup is told of a message that reached the handler though the ledger
	// holds it already, or twice in one batch.
	dup func(uuid string)
	// holds holds the batches of marked messages; nil holds none.
	holds *batchHolds
	// wrap wraps the handler that writes the ledger (and, for
	// failures, decides what it gets and returns).
	wrap func(middleware.BatchHandlerFunc) middleware.BatchHandlerFunc
	// deadLetters wraps the publisher of dead letters.
	deadLetters func(message.Publisher) message.Publisher
}

// batchConsumer is a running router with one batch consumer.
type batchConsumer struct {
	router  *message.Router
	done    chan error
	running bool
	closers []func() error // run in reverse order after the router closes
}

// startBatchConsumer runs the consumer of spec on pool until stop; logger
// receives its warnings.
func startBatchConsumer(pool *pgxpool.Pool, spec batchSpec, hooks batchHooks, logger *slog.Logger) (*batchConsumer, error) {
	c := &batchConsumer{done: make(chan error, 1)}
	var err error
	if c.router, err = message.NewRouter(message.RouterConfig{CloseTimeout: 30 * time.Second}, watermill.NewSlogLogger(logger)); err != nil {
		return nil, err
	}
	bcfg := brokerConfig(spec.Brokers, spec.Group)
	dlq, err := broker.NewPublisher(bcfg)
	if err != nil {
		return nil, err
	}
	c.closers = append(c.closers, dlq.Close)
	var pub message.Publisher = dlq
	if hooks.deadLetters != nil {
		pub = hooks.deadLetters(dlq)
	}
	if spec.CQRS {
		err = c.addService(pool, spec, hooks, pub, logger)
	} else {
		err = c.addChain(pool, spec, hooks, pub, logger)
	}
	if err != nil {
		return nil, errors.Join(err, c.stop())
	}
	go func() { c.done <- c.router.Run(context.Background()) }()
	c.running = true
	select {
	case <-c.router.Running():
		return c, nil
	case err := <-c.done:
		c.done <- err
		return nil, errors.Join(fmt.Errorf("router stopped at start: %w", err), c.stop())
	}
}

// addChain adds a router handler of middleware.BatchDefaults in the
// transactional mode, on a subscriber that feeds its batches.
func (c *batchConsumer) addChain(pool *pgxpool.Pool, spec batchSpec, hooks batchHooks, pub message.Publisher, logger *slog.Logger) error {
	store, err := postgres.NewStore(pool, postgres.Config{Schema: spec.Schema, CleanupInterval: -1})
	if err != nil {
		return err
	}
	c.closers = append(c.closers, store.Close)
	box, err := outbox.New(pool, outbox.Config{Schema: spec.Schema})
	if err != nil {
		return err
	}
	chain, err := middleware.BatchDefaults(middleware.Config{
		Publisher:   pub,
		Store:       store,
		Logger:      logger,
		Idempotency: middleware.IdempotencyConfig{Transactional: true},
		DeadLetter:  batchDeadLetters(),
	}, chainBatch())
	if err != nil {
		return err
	}
	c.closers = append(c.closers, func() error { return chain.Close(context.Background()) })
	bcfg := brokerConfig(spec.Brokers, spec.Group)
	bcfg.Batch = spec.batch()
	sub, err := broker.NewBatchSubscriber(bcfg)
	if err != nil {
		return err
	}
	c.router.AddConsumerHandler(spec.Group, spec.Topic, sub, chain.Handler(batchHandler(spec, hooks, box)))
	return nil
}

// batchEvent is the payload of the batch scenarios' messages.
type batchEvent struct {
	Key string `json:"key"`
	Seq int    `json:"seq"`
}

// addService registers a cqrs batch consumer of batchEvent in a Service
// of a DurableOutbox of its own, whose forwarder runs too.
func (c *batchConsumer) addService(pool *pgxpool.Pool, spec batchSpec, hooks batchHooks, pub message.Publisher, logger *slog.Logger) error {
	ctx := context.Background()
	durable, err := cqrs.NewDurableOutbox(ctx, pool, cqrs.DurableOutboxConfig{
		Broker: brokerConfig(spec.Brokers, ""),
		Outbox: outbox.Config{Schema: spec.Schema},
		Store:  postgres.Config{Schema: spec.Schema, CleanupInterval: -1},
		Forwarder: outbox.ForwarderConfig{
			PollInterval: 200 * time.Millisecond,
			RetryBackoff: koto.Backoff{InitialInterval: 20 * time.Millisecond, MaxInterval: 500 * time.Millisecond},
		},
		Logger: logger,
	})
	if err != nil {
		return err
	}
	c.closers = append(c.closers, durable.Close)
	svc, err := durable.Service(cqrs.ServiceConfig{
		Name:       "batches",
		Broker:     brokerConfig(spec.Brokers, ""),
		Publisher:  pub,
		DeadLetter: batchDeadLetters(),
		Logger:     logger,
	})
	if err != nil {
		return err
	}
	c.closers = append(c.closers, func() error { return svc.Close(context.Background()) })
	h := batchHandler(spec, hooks, durable.Outbox())
	return svc.Register(ctx, c.router, cqrs.NewBatchEventConsumer(func(ctx context.Context, batch []cqrs.BatchItem[batchEvent]) error {
		msgs := make([]*message.Message, len(batch))
		for i, it := range batch {
			msgs[i] = it.Message
		}
		return h(ctx, msgs)
	}, cqrs.Topic(spec.Topic), cqrs.ConsumerGroup(spec.Group), cqrs.WithBatch(spec.batch())))
}

// stop closes the router, then the rest in reverse order of creation.
func (c *batchConsumer) stop() error {
	var errs []error
	if c.running {
		errs = append(errs, c.router.Close(), <-c.done)
	}
	for i := len(c.closers) - 1; i >= 0; i-- {
		errs = append(errs, c.closers[i]())
	}
	return errors.Join(errs...)
}

// batchHandler writes a batch into the ledger in its transaction, with
// an event per message through box when spec has Events, then holds it
// if it holds a marked message, before its commit.
func batchHandler(spec batchSpec, hooks batchHooks, box *outbox.Outbox) middleware.BatchHandlerFunc {
	h := func(ctx context.Context, msgs []*message.Message) error {
		if err := writeLedger(ctx, spec.Schema, msgs, hooks.dup); err != nil {
			return err
		}
		if spec.Events != "" {
			if err := publishEvents(ctx, box, spec.Events, msgs); err != nil {
				return err
			}
		}
		hooks.holds.wait(msgs)
		return nil
	}
	if hooks.wrap != nil {
		return hooks.wrap(h)
	}
	return h
}

// writeLedger writes a row per message of msgs in the transaction of ctx,
// in their order, with one COPY. It first looks for them in the ledger:
// one found there, committed by an earlier batch, or twice in msgs, is a
// duplicate that reached the handler, and dup is told.
func writeLedger(ctx context.Context, schema string, msgs []*message.Message, dup func(string)) error {
	tx, ok := postgres.TxFromContext(ctx)
	if !ok {
		return koto.Poison(errors.New("no transaction in the batch's context"))
	}
	ids := make([]string, len(msgs))
	rows := make([][]any, len(msgs))
	seen := make(map[string]bool, len(msgs))
	for i, m := range msgs {
		ids[i], rows[i] = m.UUID, []any{m.UUID}
		if seen[m.UUID] && dup != nil {
			dup(m.UUID)
		}
		seen[m.UUID] = true
	}
	found, err := tx.Query(ctx, "SELECT message_uuid FROM "+schema+"."+ledgerTable+" WHERE message_uuid = ANY($1)", ids)
	if err != nil {
		return err
	}
	var id string
	if _, err := pgx.ForEachRow(found, []any{&id}, func() error {
		if dup != nil {
			dup(id)
		}
		return nil
	}); err != nil {
		return err
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{schema, ledgerTable}, []string{"message_uuid"}, pgx.CopyFromRows(rows))
	return err
}

// publishEvents writes an event per message of msgs into the outbox, in
// the transaction of ctx: its payload is the message's UUID.
func publishEvents(ctx context.Context, box *outbox.Outbox, topic string, msgs []*message.Message) error {
	events := make([]*message.Message, len(msgs))
	for i, m := range msgs {
		events[i] = message.NewMessage(uuid.Must(uuid.NewV7()).String(), []byte(m.UUID))
		events[i].SetContext(ctx)
	}
	return box.ContextPublisher().Publish(topic, events...)
}

// batchHolds holds, in a batch handler, a batch with a marked message,
// its rows written and its transaction open, until the test opens the
// message's hold: a fault then lands with a batch in flight, whatever the
// machine's speed. Hold k is open once open is above k. A held batch
// waits for its hold alone, not for its messages' contexts, as a slow
// handler would.
type batchHolds struct {
	marks  map[string]int    // hold by message UUID
	onHold func(k, size int) // called as a batch of size messages is held

	mu     sync.Mutex
	open   int
	opened chan struct{} // closed, and replaced, as open grows
	held   map[int]bool
}

// newBatchHolds returns the holds of marks, those below open open.
func newBatchHolds(marks []string, open int) *batchHolds {
	h := &batchHolds{marks: make(map[string]int, len(marks)), open: open, opened: make(chan struct{}), held: map[int]bool{}}
	for k, id := range marks {
		h.marks[id] = k
	}
	return h
}

// wait holds the batch of msgs until the holds of its marked messages
// open.
func (h *batchHolds) wait(msgs []*message.Message) {
	if h == nil {
		return
	}
	for _, m := range msgs {
		if k, ok := h.marks[m.UUID]; ok {
			h.hold(k, len(msgs))
		}
	}
}

func (h *batchHolds) hold(k, size int) {
	h.mu.Lock()
	if k < h.open {
		h.mu.Unlock()
		return
	}
	h.held[k] = true
	opened := h.opened
	h.mu.Unlock()
	if h.onHold != nil {
		h.onHold(k, size)
	}
	for {
		<-opened
		h.mu.Lock()
		open := k < h.open
		opened = h.opened
		h.mu.Unlock()
		if open {
			return
		}
	}
}

// openTo opens the holds below n.
func (h *batchHolds) openTo(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n <= h.open {
		return
	}
	h.open = n
	close(h.opened)
	h.opened = make(chan struct{})
}

// isHeld reports whether a batch was held by hold k.
func (h *batchHolds) isHeld(k int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[k]
}

// batchMessages returns total messages of keys keys, in bursts of [burst]
// messages of a key, with batchEvent payloads, and the place of each by
// UUID.
func batchMessages(prefix string, keys, total int) ([]*message.Message, map[string]keySeq) {
	msgs, places := orderedMessages(prefix, keys, total)
	for _, m := range msgs {
		p := places[m.UUID]
		m.Payload, _ = json.Marshal(batchEvent{Key: p.key, Seq: p.seq})
	}
	return msgs, places
}

// holdMarks picks, for each of the parts of msgs that bounds delimit
// (part k from bounds[k] to bounds[k+1]), a message at random in the
// middle half of the part that is not a re-publication: the handler
// reaches it once the consumer is well into the part.
func holdMarks(msgs []*message.Message, bounds []int, rnd func(int) int) []string {
	var marks []string
	for k := 0; k+1 < len(bounds); k++ {
		from, n := bounds[k]+(bounds[k+1]-bounds[k])/4, (bounds[k+1]-bounds[k])/2
		i := from + rnd(n)
		for isCopyIn(msgs[:i], msgs[i].UUID) {
			i++
		}
		marks = append(marks, msgs[i].UUID)
	}
	return marks
}

// isCopyIn reports whether a message with id comes before, in msgs.
func isCopyIn(msgs []*message.Message, id string) bool {
	for _, m := range msgs {
		if m.UUID == id {
			return true
		}
	}
	return false
}

// partBounds returns the bounds of n parts of total, as equal as can be.
func partBounds(total, n int) []int {
	bounds := make([]int, n+1)
	for k := range bounds {
		bounds[k] = k * total / n
	}
	return bounds
}

// dupLine prefixes what a batch consumer subprocess writes on its standard
// error as a duplicate reaches its handler.
const dupLine = "duplicate reached the handler:"

// holdText begins the line that a batch consumer subprocess writes on its
// standard error as hold k holds a batch; the batch's size follows.
func holdText(k int) string { return "batch held by hold " + strconv.Itoa(k) + ": " }
