package cqrs_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/cqrs"
	"github.com/koto-dev/watermill-koto/internal/kafkatest"
)

// testTimeout bounds every wait in these tests.
const testTimeout = kafkatest.Timeout

// testContext ends after testTimeout or with the test.
func testContext(t *testing.T) context.Context { return kafkatest.Context(t) }

// testLogger logs errors to stderr with -v, and nothing otherwise: the
// tests provoke retries, timeouts and dead letters on purpose.
func testLogger() *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// serviceName returns base on a broker of the test's own, and base with a
// random suffix on a shared cluster (KAFKA_BROKERS), so that topic names
// never collide across runs.
func serviceName(t *testing.T, base string) string {
	t.Helper()
	if len(kafkatest.FromEnv()) == 0 {
		return base
	}
	return strings.ReplaceAll(kafkatest.Topic(t, base), ".", "-")
}

func newPublisher(t *testing.T, brokers []string) message.Publisher {
	t.Helper()
	pub, err := broker.NewPublisher(broker.Config{Brokers: brokers}, nil)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// newService returns a Service that cfg configures, with the test's
// brokers, logger and fast retries filled in, closed when the test ends.
func newService(t *testing.T, brokers []string, cfg cqrs.ServiceConfig) *cqrs.Service {
	t.Helper()
	cfg.Broker.Brokers = brokers
	cfg.Logger = testLogger()
	if cfg.DeadLetter.Backoff.InitialInterval == 0 {
		cfg.DeadLetter.Backoff.InitialInterval = time.Millisecond
		cfg.DeadLetter.Backoff.MaxInterval = 10 * time.Millisecond
	}
	svc, err := cqrs.NewService(cfg)
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

func newRouter(t *testing.T) *message.Router {
	t.Helper()
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, watermill.NewSlogLogger(testLogger()))
	if err != nil {
		t.Fatalf("NewRouter: %v", err)
	}
	return r
}

// runRouter runs r until the test ends and waits until its handlers run.
func runRouter(t *testing.T, r *message.Router) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	t.Cleanup(func() {
		_ = r.Close()
		if err := <-done; err != nil {
			t.Errorf("router: %v", err)
		}
	})
	select {
	case <-r.Running():
	case <-time.After(testTimeout):
		t.Fatal("router did not start")
	}
}

func newDispatcher(t *testing.T, pub message.Publisher, brokers []string, cfg cqrs.CommandDispatcherConfig) *cqrs.CommandDispatcher {
	t.Helper()
	cfg.Broker.Brokers = brokers
	cfg.Logger = testLogger()
	d, err := cqrs.NewCommandDispatcher(pub, cfg)
	if err != nil {
		t.Fatalf("NewCommandDispatcher: %v", err)
	}
	ctx := testContext(t)
	if err := d.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// receive returns the next value of ch, or fails the test after
// testTimeout.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("no %s within %s", what, testTimeout)
		panic("unreachable")
	}
}

// errPublishDown is the default error of a flakyPublisher's failing calls:
// the one sarama returns when no broker can be reached.
var errPublishDown = fmt.Errorf("injected: %w", sarama.ErrOutOfBrokers)

// flakyPublisher is a real publisher whose calls to Publish fail while
// fewer than failures of them have failed.
type flakyPublisher struct {
	message.Publisher
	mu       sync.Mutex
	failures int
	failed   int
	err      error // what a failing call returns; nil: errPublishDown
}

func (p *flakyPublisher) Publish(topic string, msgs ...*message.Message) error {
	p.mu.Lock()
	fail := p.failed < p.failures
	if fail {
		p.failed++
	}
	p.mu.Unlock()
	if fail {
		return fmt.Errorf("publishing to %s: %w", topic, cmp.Or(p.err, errPublishDown))
	}
	return p.Publisher.Publish(topic, msgs...)
}

// failFor makes the next n calls fail with errPublishDown.
func (p *flakyPublisher) failFor(n int) { p.failWith(n, nil) }

// failWith makes the next n calls fail with err (nil: errPublishDown).
func (p *flakyPublisher) failWith(n int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures, p.failed, p.err = n, 0, err
}

// failedCalls returns how many calls failed since the last failFor.
func (p *flakyPublisher) failedCalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

// nackedErrors adds an outermost middleware to r and returns the errors it
// sees, what the router nacks; it keeps the first 8.
func nackedErrors(r *message.Router) <-chan error {
	errs := make(chan error, 8)
	r.AddMiddleware(func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			out, err := h(msg)
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
			return out, err
		}
	})
	return errs
}
