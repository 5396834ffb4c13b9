package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	wmmiddleware "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/middleware"
)

func TestPermanentAndTransient(t *testing.T) {
	if middleware.Poison(nil) != nil || middleware.Outage(nil) != nil {
		t.Fatal("marking nil must give nil")
	}
	cause := errors.New("cause")
	p := fmt.Errorf("wrapped: %w", middleware.Poison(cause))
	var pe *middleware.PoisonError
	if !errors.As(p, &pe) || pe.Err != cause || !errors.Is(p, cause) {
		t.Errorf("Permanent: errors.As/Is fail on %v", p)
	}
	if p.Error() != "wrapped: cause" {
		t.Errorf("Permanent changes the text: %q", p.Error())
	}
	tr := fmt.Errorf("wrapped: %w", middleware.Outage(cause))
	var te *middleware.OutageError
	if !errors.As(tr, &te) || te.Err != cause || !errors.Is(tr, cause) {
		t.Errorf("Transient: errors.As/Is fail on %v", tr)
	}
	if errors.As(tr, &pe) || errors.As(p, &te) {
		t.Error("a permanent error is transient or the other way round")
	}
}

func TestClassify(t *testing.T) {
	var syntaxErr *json.SyntaxError
	decodeErr := json.Unmarshal([]byte("{"), &struct{}{})
	if !errors.As(decodeErr, &syntaxErr) {
		t.Fatalf("json.Unmarshal error is %T", decodeErr)
	}
	typeErr := json.Unmarshal([]byte(`{"n":"x"}`), &struct{ N int }{})
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	recovered := panicThroughRecoverer()
	plain := errors.New("plain")
	cases := []struct {
		name string
		err  error
		want middleware.ErrorClass
	}{
		{"plain error", plain, middleware.ClassRetryable},
		{"wrapped plain error", fmt.Errorf("x: %w", plain), middleware.ClassRetryable},
		{"unique violation", &pgconn.PgError{Code: "23505"}, middleware.ClassRetryable},
		{"context canceled", context.Canceled, middleware.ClassRetryable},
		{"permanent", middleware.Poison(plain), middleware.ClassPoison},
		{"panic", &middleware.PanicError{Value: "boom"}, middleware.ClassPoison},
		{"watermill Recoverer panic", recovered, middleware.ClassPoison},
		// A dependency's HTML error page during its own outage, or any other
		// bare JSON error, says nothing about the message: retryable. Decoders
		// of the message's payload mark their errors Permanent.
		{"JSON syntax", fmt.Errorf("decode: %w", decodeErr), middleware.ClassRetryable},
		{"JSON type", typeErr, middleware.ClassRetryable},
		{"payload decode marked permanent", middleware.Poison(fmt.Errorf("decode: %w", decodeErr)), middleware.ClassPoison},
		{"transient", middleware.Outage(plain), middleware.ClassOutage},
		{"store unavailable", fmt.Errorf("check: %w", idempotency.ErrStoreUnavailable), middleware.ClassOutage},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), middleware.ClassOutage},
		{"net error", fmt.Errorf("dial: %w", dialErr), middleware.ClassOutage},
		{"pg connect", &pgconn.ConnectError{}, middleware.ClassOutage},
		{"pg too many connections", &pgconn.PgError{Code: "53300"}, middleware.ClassOutage},
		{"pg admin shutdown", &pgconn.PgError{Code: "57P01"}, middleware.ClassOutage},
		{"pg connection failure", &pgconn.PgError{Code: "08006"}, middleware.ClassOutage},
		{"outermost mark wins: transient", middleware.Outage(middleware.Poison(plain)), middleware.ClassOutage},
		{"outermost mark wins: permanent", middleware.Poison(middleware.Outage(plain)), middleware.ClassPoison},
		{"mark beats heuristics", middleware.Poison(dialErr), middleware.ClassPoison},
		{"outage beats poison", errors.Join(recovered, dialErr), middleware.ClassOutage},
		{"mark inside a join", errors.Join(plain, middleware.Poison(plain)), middleware.ClassPoison},
	}
	for _, c := range cases {
		if got := middleware.Classify(c.err); got != c.want {
			t.Errorf("%s: Classify(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestClassifyKafka: Kafka errors that say the cluster is unavailable for
// now are outages, also inside sarama's producer errors; errors of the
// request itself stay retryable.
func TestClassifyKafka(t *testing.T) {
	produced := func(err error) *sarama.ProducerError {
		return &sarama.ProducerError{Msg: &sarama.ProducerMessage{Topic: "orders"}, Err: err}
	}
	outages := []error{
		sarama.ErrOutOfBrokers, sarama.ErrNotConnected, sarama.ErrClosedClient, sarama.ErrShuttingDown,
		sarama.ErrControllerNotAvailable, sarama.ErrLeaderNotAvailable, sarama.ErrNotLeaderForPartition,
		sarama.ErrRequestTimedOut, sarama.ErrBrokerNotAvailable, sarama.ErrReplicaNotAvailable,
		sarama.ErrNetworkException, sarama.ErrNotEnoughReplicas, sarama.ErrNotEnoughReplicasAfterAppend,
		sarama.ErrNotController, sarama.ErrKafkaStorageError, sarama.ErrThrottlingQuotaExceeded,
		sarama.Wrap(sarama.ErrOutOfBrokers, errors.New("dial tcp: refused")),
		fmt.Errorf("publish: %w", produced(sarama.ErrNotEnoughReplicas)),
		sarama.ProducerErrors{produced(sarama.ErrLeaderNotAvailable), produced(sarama.ErrRequestTimedOut)},
	}
	for _, err := range outages {
		if got := middleware.Classify(fmt.Errorf("handler: %w", err)); got != middleware.ClassOutage {
			t.Errorf("Classify(%v) = %v, want outage", err, got)
		}
	}
	retryable := []error{
		sarama.ErrMessageSizeTooLarge, sarama.ErrUnknownTopicOrPartition, sarama.ErrInvalidMessage,
		sarama.ErrTopicAuthorizationFailed, produced(sarama.ErrInvalidPartition),
		sarama.ProducerErrors{produced(sarama.ErrLeaderNotAvailable), produced(sarama.ErrMessageSizeTooLarge)},
	}
	for _, err := range retryable {
		if got := middleware.Classify(err); got != middleware.ClassRetryable {
			t.Errorf("Classify(%v) = %v, want retryable", err, got)
		}
	}
}

func panicThroughRecoverer() (err error) {
	_, err = wmmiddleware.Recoverer(func(*message.Message) ([]*message.Message, error) {
		panic("boom")
	})(message.NewMessage("1", nil))
	return err
}

func TestErrorClassString(t *testing.T) {
	for class, want := range map[middleware.ErrorClass]string{
		middleware.ClassRetryable: "retryable", middleware.ClassPoison: "poison", middleware.ClassOutage: "outage",
	} {
		if class.String() != want {
			t.Errorf("%d.String() = %q, want %q", class, class.String(), want)
		}
	}
}
