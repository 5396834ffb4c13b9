package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	wmmiddleware "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/middleware"
)

func TestPermanentAndTransient(t *testing.T) {
	if koto.Poison(nil) != nil || koto.Outage(nil) != nil {
		t.Fatal("marking nil must give nil")
	}
	cause := errors.New("cause")
	p := fmt.Errorf("wrapped: %w", koto.Poison(cause))
	var pe *middleware.PoisonError
	if !errors.As(p, &pe) || pe.Err != cause || !errors.Is(p, cause) {
		t.Errorf("Permanent: errors.As/Is fail on %v", p)
	}
	if p.Error() != "wrapped: cause" {
		t.Errorf("Permanent changes the text: %q", p.Error())
	}
	tr := fmt.Errorf("wrapped: %w", koto.Outage(cause))
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
		want koto.Class
	}{
		{"plain error", plain, koto.ClassRetryable},
		{"wrapped plain error", fmt.Errorf("x: %w", plain), koto.ClassRetryable},
		{"unique violation", &pgconn.PgError{Code: "23505"}, koto.ClassRetryable},
		{"context canceled", context.Canceled, koto.ClassRetryable},
		{"permanent", koto.Poison(plain), koto.ClassPoison},
		{"panic", &middleware.PanicError{Value: "boom"}, koto.ClassPoison},
		{"watermill Recoverer panic", recovered, koto.ClassPoison},
		// A dependency's HTML error page during its own outage, or any other
		// bare JSON error, says nothing about the message: retryable. Decoders
		// of the message's payload mark their errors Permanent.
		{"JSON syntax", fmt.Errorf("decode: %w", decodeErr), koto.ClassRetryable},
		{"JSON type", typeErr, koto.ClassRetryable},
		{"payload decode marked permanent", koto.Poison(fmt.Errorf("decode: %w", decodeErr)), koto.ClassPoison},
		{"transient", koto.Outage(plain), koto.ClassOutage},
		{"store unavailable", fmt.Errorf("check: %w", idempotency.ErrStoreUnavailable), koto.ClassOutage},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), koto.ClassOutage},
		{"net error", fmt.Errorf("dial: %w", dialErr), koto.ClassOutage},
		{"pg connect", &pgconn.ConnectError{}, koto.ClassOutage},
		{"pg too many connections", &pgconn.PgError{Code: "53300"}, koto.ClassOutage},
		{"pg admin shutdown", &pgconn.PgError{Code: "57P01"}, koto.ClassOutage},
		{"pg connection failure", &pgconn.PgError{Code: "08006"}, koto.ClassOutage},
		{"outermost mark wins: transient", koto.Outage(koto.Poison(plain)), koto.ClassOutage},
		{"outermost mark wins: permanent", koto.Poison(koto.Outage(plain)), koto.ClassPoison},
		{"mark beats heuristics", koto.Poison(dialErr), koto.ClassPoison},
		{"outage beats poison", errors.Join(recovered, dialErr), koto.ClassOutage},
		{"mark inside a join", errors.Join(plain, koto.Poison(plain)), koto.ClassPoison},
	}
	for _, c := range cases {
		if got := koto.ClassOf(c.err); got != c.want {
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
		if got := koto.ClassOf(fmt.Errorf("handler: %w", err)); got != koto.ClassOutage {
			t.Errorf("Classify(%v) = %v, want outage", err, got)
		}
	}
	retryable := []error{
		sarama.ErrMessageSizeTooLarge, sarama.ErrUnknownTopicOrPartition, sarama.ErrInvalidMessage,
		sarama.ErrTopicAuthorizationFailed, produced(sarama.ErrInvalidPartition),
		sarama.ProducerErrors{produced(sarama.ErrLeaderNotAvailable), produced(sarama.ErrMessageSizeTooLarge)},
	}
	for _, err := range retryable {
		if got := koto.ClassOf(err); got != koto.ClassRetryable {
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
	for class, want := range map[koto.Class]string{
		koto.ClassRetryable: "retryable", koto.ClassPoison: "poison", koto.ClassOutage: "outage",
	} {
		if class.String() != want {
			t.Errorf("%d.String() = %q, want %q", class, class.String(), want)
		}
	}
}
