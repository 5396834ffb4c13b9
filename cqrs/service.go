package cqrs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/internal/config"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/telemetry"
	"github.com/koto-dev/watermill-koto/topics"
)

// ServiceConfig configures a Service.
type ServiceConfig struct {
	// Name is the service's name: it prefixes the consumer groups of its
	// consumers and the topics of its commands. Required.
	Name string

	// Broker is where consumers connect and, with AutoProvisionTopics,
	// where topics are created (with Broker.Provision's settings). Brokers
	// is required; ConsumerGroup is set per consumer.
	Broker broker.Config

	// Publisher publishes dead letters and replies. Nil: the Service
	// creates one from Broker at the first Register and closes it in
	// Close.
	Publisher message.Publisher

	// Store deduplicates the messages of idempotent consumers. Nil: an
	// in-memory store with IdempotencyWindow, created by the first Register
	// of an idempotent consumer and closed by Close. Production services
	// want the PostgreSQL store (idempotency/postgres), whose marks survive
	// restarts.
	Store idempotency.Store

	// IdempotencyWindow is the window of the in-memory store. Default:
	// idempotency.DefaultWindow.
	IdempotencyWindow time.Duration

	// AutoProvisionTopics makes Register create the topics its consumers
	// read and their dead-letter topics (broker.ProvisionTopics).
	AutoProvisionTopics bool

	// DeadLetter configures the retries and dead letters of every
	// consumer (middleware.DeadLetter). Its Backoff also spaces the retries
	// of a reply that fails to publish.
	DeadLetter middleware.DeadLetterConfig

	// Logger receives the consumers' logs. Default: slog.Default().
	Logger *slog.Logger

	// Telemetry traces and measures the consumers, their replies and dead
	// letters (middleware.Config.Telemetry). Nil: OpenTelemetry's global
	// providers.
	Telemetry *telemetry.Telemetry

	// durable is the DurableOutbox whose Service this is: its consumers
	// run in the transactional mode, with its store and outbox.
	durable *DurableOutbox
}

func (c *ServiceConfig) setDefaults() {
	if c.IdempotencyWindow == 0 {
		c.IdempotencyWindow = idempotency.DefaultWindow
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
}

// Validate reports every problem of the configuration, zero fields
// counting as their defaults, Broker and DeadLetter included, in one error
// that wraps koto.ErrInvalidConfig.
func (c ServiceConfig) Validate() error {
	c.setDefaults()
	p := config.For("cqrs.ServiceConfig")
	validateService(p, "Name", c.Name, nil)
	if c.IdempotencyWindow < 0 {
		p.Add("IdempotencyWindow", "is negative (%s); use 0 for the default (%s) or a positive duration", c.IdempotencyWindow, idempotency.DefaultWindow)
	}
	p.Nest("DeadLetter", c.DeadLetter.Validate())
	p.Nest("Broker", c.Broker.Validate())
	return p.Err()
}

// Service registers the consumers of one service on a Watermill router.
// Build it with NewService, then call Register once or more, before the
// router runs or while it runs. It is safe for concurrent use.
type Service struct {
	cfg    ServiceConfig
	logger *slog.Logger
	tel    *telemetry.Telemetry

	regMu sync.Mutex // serialises Register

	mu       sync.Mutex
	closed   bool
	pub      message.Publisher // cfg.Publisher or ownPub
	ownPub   message.Publisher
	store    idempotency.Store // cfg.Store or memStore
	memStore *idempotency.MemoryStore
	chains   []closer // the middleware chains of the registered consumers
	conns    int      // reserved in the DurableOutbox by the registered consumers
}

// NewService returns a Service for cfg. It does not connect to Kafka.
func NewService(cfg ServiceConfig) (*Service, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tel, err := telemetryOf(cfg.Telemetry)
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, logger: cfg.Logger.With("service", cfg.Name), tel: tel, pub: cfg.Publisher, store: cfg.Store}, nil
}

// Register adds consumers to router, one handler each, with the topic,
// group and middleware that Consumers in the package doc describes.
// Everything is checked before anything is added: an invalid topic or group
// (the error names it and wraps [ErrInvalidRoute]), a handler name the
// router already has, two consumers with one group, or transactional
// consumers that do not fit the DurableOutbox's pool fail the whole call
// with koto.ErrInvalidConfig. With AutoProvisionTopics the topics and
// dead-letter topics are created, which ctx bounds. On a running router,
// Register also starts the consumers (router.RunHandlers) under ctx, as
// Watermill does: they stop when ctx ends or the router closes, so pass
// the context the router runs with. Call it before Run, or after Running
// is closed, not while Run starts. A closed router is refused.
func (s *Service) Register(ctx context.Context, router *message.Router, consumers ...Consumer) error {
	if router == nil {
		return fmt.Errorf("%w: the router is nil; pass the message.Router to add the consumers to", koto.ErrInvalidConfig)
	}
	if router.IsClosed() {
		return fmt.Errorf("%w: the router is closed; register the consumers on a router that has not been closed", koto.ErrInvalidConfig)
	}
	s.regMu.Lock() // plan checks the router's handler names; keep them until added
	defer s.regMu.Unlock()
	plans, err := s.plan(router, consumers)
	if err != nil {
		return err
	}
	conns, err := s.reserveConns(plans)
	if err != nil {
		return err
	}
	if err := s.add(ctx, router, plans); err != nil {
		s.releaseConns(conns)
		return err
	}
	s.keepConns(conns)
	if !router.IsRunning() {
		return nil // Run starts them
	}
	if err := router.RunHandlers(ctx); err != nil {
		return fmt.Errorf("cqrs: starting the consumers of %s on the running router: %w", s.cfg.Name, err)
	}
	return nil
}

// add adds the handlers of plans to router, with what they need.
func (s *Service) add(ctx context.Context, router *message.Router, plans []consumerPlan) error {
	pub, err := s.publisher()
	if err != nil {
		return err
	}
	pub = s.tel.Publisher(pub) // replies and dead letters
	chains, err := s.middlewares(pub, plans)
	if err != nil {
		return err
	}
	if err := s.provision(ctx, plans); err != nil {
		return err
	}
	subs, err := s.subscribers(plans)
	if err != nil {
		return err
	}
	for i, p := range plans {
		env := &handlerEnv{handlerName: p.group, pub: pub, backoff: s.cfg.DeadLetter.Backoff, logger: s.logger,
			transactional: s.transactional(p)}
		h := router.AddConsumerHandler(p.group, p.topic, subs[i], chains[i].handler(p.spec, env))
		h.AddMiddleware(growStackMiddleware) // outermost, see there
		h.AddMiddleware(chains[i].middlewares...)
	}
	return nil
}

// transactional reports whether p's consumer runs in a transaction on the
// DurableOutbox's pool.
func (s *Service) transactional(p consumerPlan) bool { return s.cfg.durable != nil && p.idempotent }

// reserveConns counts in the DurableOutbox the connections that the
// transactional consumers of plans may hold at once, Broker.Concurrency
// each when it is above 1, and refuses plans that do not fit its pool
// (see Durable outbox in the package doc).
func (s *Service) reserveConns(plans []consumerPlan) (int, error) {
	concurrency, n := s.cfg.Broker.Concurrency, 0
	for _, p := range plans {
		switch {
		case !s.transactional(p):
		case p.batch != nil:
			n += p.batch.Parallel
		case concurrency > 1:
			n += concurrency
		}
	}
	if n == 0 {
		return 0, nil
	}
	before, maxConns, ok := s.cfg.durable.reserveConns(n)
	if !ok {
		need := before + n + spareConns
		return 0, config.Invalid("cqrs.ServiceConfig", "Broker.Concurrency",
			"is %d, so the %d transactional consumer(s) being registered may hold %d connections of the DurableOutbox's pool at once; "+
				"with the %d of those registered before and %d to spare, %d, more than the pool's MaxConns (%d): "+
				"their messages would wait for connections until they time out; raise MaxConns to at least %d "+
				"(pool_max_conns in the database URL), or lower Concurrency, or a batch consumer's BatchConfig.Parallel "+
				"(it holds one connection per batch running)",
			concurrency, countTransactional(s, plans), n, before, spareConns, need, maxConns, need)
	}
	return n, nil
}

// countTransactional counts the transactional consumers of plans.
func countTransactional(s *Service, plans []consumerPlan) int {
	n := 0
	for _, p := range plans {
		if s.transactional(p) {
			n++
		}
	}
	return n
}

// keepConns makes n connections reserved for registered consumers the
// Service's, which Close releases; after Close it releases them at once.
func (s *Service) keepConns(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.releaseConns(n)
		return
	}
	s.conns += n
}

// releaseConns gives n reserved connections back to the DurableOutbox.
func (s *Service) releaseConns(n int) {
	if n > 0 {
		s.cfg.durable.releaseConns(n)
	}
}

// provision creates the topics and dead-letter topics of plans when
// AutoProvisionTopics asks for it.
func (s *Service) provision(ctx context.Context, plans []consumerPlan) error {
	if !s.cfg.AutoProvisionTopics {
		return nil
	}
	names := make([]string, 0, 2*len(plans))
	for _, p := range plans {
		names = append(names, p.topic, p.deadLetterTopic)
	}
	if err := broker.ProvisionTopics(ctx, s.cfg.Broker, names...); err != nil {
		return fmt.Errorf("cqrs: provisioning the topics of %s: %w", s.cfg.Name, err)
	}
	return nil
}

// subscribers returns one subscriber per plan, in its consumer group, or
// none.
func (s *Service) subscribers(plans []consumerPlan) ([]message.Subscriber, error) {
	subs := make([]message.Subscriber, 0, len(plans))
	for _, p := range plans {
		bcfg := s.cfg.Broker
		bcfg.ConsumerGroup = p.group
		bcfg.Logger = cmp.Or(bcfg.Logger, s.logger)
		if p.batch != nil {
			// A batch fills from the messages in flight: enough for the
			// batches running and one more filling.
			bcfg.Ordering = broker.OrderByKeyInBatches
			bcfg.Concurrency = max(bcfg.Concurrency, (p.batch.Parallel+1)*p.batch.MaxMessages)
		}
		sub, err := broker.NewSubscriber(bcfg)
		if err != nil {
			for _, sub := range subs {
				_ = sub.Close()
			}
			return nil, fmt.Errorf("cqrs: subscriber for %s: %w", p.group, err)
		}
		subs = append(subs, sub)
	}
	return subs, nil
}

// Close closes what the Service created: the middleware chains of its
// consumers, waiting until ctx ends for their marks after an ack, then its
// in-memory store and its publisher. Close the router first: after Close, a
// message that still reaches an idempotent consumer is nacked as an
// outage. Calling it twice is fine.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, c := range s.chains {
		errs = append(errs, c.Close(ctx))
	}
	if s.ownPub != nil {
		errs = append(errs, s.ownPub.Close())
	}
	if s.memStore != nil {
		errs = append(errs, s.memStore.Close())
	}
	s.releaseConns(s.conns)
	return errors.Join(errs...)
}

// consumerPlan is a consumer with its registration resolved.
type consumerPlan struct {
	spec            *consumerSpec
	topic           string
	group           string
	deadLetterTopic string
	idempotent      bool
	batch           *middleware.BatchConfig // a batch consumer's, with its defaults
}

// plan resolves and checks the registration of every consumer.
func (s *Service) plan(router *message.Router, consumers []Consumer) ([]consumerPlan, error) {
	existing := router.Handlers()
	seen := make(map[string]bool, len(consumers))
	plans := make([]consumerPlan, 0, len(consumers))
	for _, c := range consumers {
		if c == nil {
			return nil, fmt.Errorf("%w: a consumer is nil; build it with NewEventConsumer, NewCommandConsumer or NewCommandConsumerWithResult", koto.ErrInvalidConfig)
		}
		p, err := s.planOne(c.spec())
		if err != nil {
			return nil, err
		}
		if _, ok := existing[p.group]; ok || seen[p.group] {
			return nil, fmt.Errorf("%w: %s consumer of %s: the router already has a handler %q; give one of them another cqrs.ConsumerGroup",
				koto.ErrInvalidConfig, p.spec.kind, p.spec.typeName, p.group)
		}
		seen[p.group] = true
		plans = append(plans, p)
	}
	return plans, nil
}

func (s *Service) planOne(spec *consumerSpec) (consumerPlan, error) {
	p := consumerPlan{spec: spec}
	if spec.typeName == "" {
		return p, fmt.Errorf("%w: %s consumer of %s: the type has no name; use a named type", koto.ErrInvalidConfig, spec.kind, spec.goType)
	}
	var err error
	if p.topic, err = s.topicOf(spec); err != nil {
		return p, err
	}
	p.group = cmp.Or(spec.opts.group, topics.ConsumerGroup(s.cfg.Name, spec.typeName))
	p.deadLetterTopic = cmp.Or(s.cfg.DeadLetter.Topic, topics.DeadLetter(p.group))
	if err := topics.Validate(p.deadLetterTopic); err != nil {
		return p, invalidRoute("%s consumer of %s: consumer group %q gives no valid dead-letter topic: %w",
			spec.kind, spec.typeName, p.group, err)
	}
	p.idempotent = spec.kind == eventKind
	if spec.opts.idempotent != nil {
		p.idempotent = *spec.opts.idempotent
	}
	if err := p.planBatch(); err != nil {
		return p, err
	}
	if spec.opts.lockKeys != nil && (!p.idempotent || s.cfg.durable == nil) {
		return p, fmt.Errorf("%w: %s consumer of %s: LockKeys orders what the consumer writes into the outbox in its transaction; "+
			"it needs an idempotent consumer of a DurableOutbox's Service", koto.ErrInvalidConfig, spec.kind, spec.typeName)
	}
	return p, nil
}

// topicOf returns the topic a consumer reads: Topic's, or the convention.
func (s *Service) topicOf(spec *consumerSpec) (string, error) {
	o, topic := spec.opts, ""
	switch {
	case o.topic != "":
		topic = o.topic
	case spec.kind == commandKind && o.from != "":
		return "", fmt.Errorf("%w: command consumer of %s: From does not apply to commands, which are read from the handling service's topic; use Topic for another one",
			koto.ErrInvalidConfig, spec.typeName)
	case spec.kind == commandKind:
		topic = topics.Command(s.cfg.Name, spec.typeName)
	case o.from != "":
		topic = topics.Event(o.from, spec.typeName)
	default:
		return "", fmt.Errorf("%w: event consumer of %s has no topic; add cqrs.From(producing service) or cqrs.Topic(topic)",
			koto.ErrInvalidConfig, spec.typeName)
	}
	if err := topics.Validate(topic); err != nil {
		return "", invalidRoute("%s consumer of %s: topic: %w", spec.kind, spec.typeName, err)
	}
	return topic, nil
}

// middlewares builds the chain of each plan, for Close to close.
func (s *Service) middlewares(pub message.Publisher, plans []consumerPlan) ([]consumerChain, error) {
	chains := make([]consumerChain, len(plans))
	for i, p := range plans {
		cfg, err := s.chainConfig(pub, p)
		if err != nil {
			return nil, err
		}
		if chains[i], err = newConsumerChain(cfg, p); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	for _, c := range chains {
		s.chains = append(s.chains, c.closer)
	}
	return chains, nil
}

// chainConfig is the middleware configuration of p's consumer.
func (s *Service) chainConfig(pub message.Publisher, p consumerPlan) (middleware.Config, error) {
	cfg := middleware.Config{Publisher: pub, Logger: s.logger, DeadLetter: s.cfg.DeadLetter, Telemetry: s.tel}
	if !p.idempotent {
		return cfg, nil
	}
	var err error
	if cfg.Store, err = s.idempotencyStore(); err != nil {
		return cfg, err
	}
	if d := s.cfg.durable; d != nil {
		cfg.Idempotency.Transactional = true
		if p.batch == nil { // a batch handler publishes through the outbox itself
			cfg.Idempotency.Outbox = d.box.ContextPublisher()
		}
	}
	cfg.Idempotency.LockKeys = p.spec.opts.lockKeys
	if scope := p.spec.opts.scope; scope != nil {
		cfg.Idempotency.Scope = func(*message.Message) string { return *scope }
	}
	return cfg, nil
}

// publisher returns the configured publisher, or creates the service's own.
func (s *Service) publisher() (message.Publisher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if s.pub != nil {
		return s.pub, nil
	}
	bcfg := s.cfg.Broker
	bcfg.Logger = cmp.Or(bcfg.Logger, s.logger)
	pub, err := broker.NewPublisher(bcfg)
	if err != nil {
		return nil, fmt.Errorf("cqrs: publisher of %s: %w", s.cfg.Name, err)
	}
	s.pub, s.ownPub = pub, pub
	return pub, nil
}

// idempotencyStore returns the store of idempotent consumers: the
// configured one, or the service's in-memory store, created on first use.
func (s *Service) idempotencyStore() (idempotency.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, ErrClosed
	case s.store == nil:
		s.memStore = idempotency.NewMemoryStore(s.cfg.IdempotencyWindow)
		s.store = s.memStore
	}
	return s.store, nil
}
