package koto_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	wmmiddleware "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

// TestMarks: Poison and Outage keep the error's text and chain, and mark
// nil as nil.
func TestMarks(t *testing.T) {
	cause := errors.New("cause")
	for _, c := range []struct {
		name string
		mark func(error) error
		want koto.Class
	}{
		{"Poison", koto.Poison, koto.ClassPoison},
		{"Outage", koto.Outage, koto.ClassOutage},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.mark(nil) != nil {
				t.Fatalf("%s(nil) is not nil", c.name)
			}
			err := fmt.Errorf("wrapped: %w", c.mark(cause))
			if !errors.Is(err, cause) {
				t.Errorf("errors.Is(%v, cause) = false", err)
			}
			if err.Error() != "wrapped: cause" {
				t.Errorf("%s changes the text: %q", c.name, err.Error())
			}
			if got := koto.ClassOf(err); got != c.want {
				t.Errorf("ClassOf(%v) = %v, want %v", err, got, c.want)
			}
		})
	}
}

// retryableDriverError is what a database driver returns for a statement
// that never reached the server (pgx's errors have the same method).
type retryableDriverError struct{ safe bool }

func (e retryableDriverError) Error() string {
	return fmt.Sprintf("not sent (safe to retry: %v)", e.safe)
}
func (e retryableDriverError) SafeToRetry() bool { return e.safe }

// TestClassOf: the mark nearest the top of the chain decides; without a
// mark, what any client returns when a network or server is down is an
// outage, a panic recovered by Watermill is poison, and the rest is
// retryable.
func TestClassOf(t *testing.T) {
	decodeErr := json.Unmarshal([]byte("{"), &struct{}{})
	typeErr := json.Unmarshal([]byte(`{"n":"x"}`), &struct{ N int }{})
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	recovered := panicThroughRecoverer()
	plain := errors.New("plain")
	cases := []struct {
		name string
		err  error
		want koto.Class
	}{
		{"nil", nil, koto.ClassRetryable},
		{"plain error", plain, koto.ClassRetryable},
		{"wrapped plain error", fmt.Errorf("x: %w", plain), koto.ClassRetryable},
		{"context canceled", context.Canceled, koto.ClassRetryable},
		{"unique violation", &pgconn.PgError{Code: "23505"}, koto.ClassRetryable},
		{"syntax error", &pgconn.PgError{Code: "42601"}, koto.ClassRetryable},
		// A dependency's HTML error page during its own outage, or any other
		// bare JSON error, says nothing about the message: retryable.
		// Decoders of the message's payload mark their errors with Poison.
		{"JSON syntax", fmt.Errorf("decode: %w", decodeErr), koto.ClassRetryable},
		{"JSON type", typeErr, koto.ClassRetryable},
		{"not safe to retry", retryableDriverError{safe: false}, koto.ClassRetryable},

		{"poison", koto.Poison(plain), koto.ClassPoison},
		{"wrapped poison", fmt.Errorf("handler: %w", koto.Poison(plain)), koto.ClassPoison},
		{"payload decode marked poison", koto.Poison(fmt.Errorf("decode: %w", decodeErr)), koto.ClassPoison},
		{"watermill Recoverer panic", recovered, koto.ClassPoison},
		{"wrapped Recoverer panic", fmt.Errorf("handler: %w", recovered), koto.ClassPoison},

		{"outage", koto.Outage(plain), koto.ClassOutage},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), koto.ClassOutage},
		{"net error", fmt.Errorf("dial: %w", dialErr), koto.ClassOutage},
		{"safe to retry", fmt.Errorf("exec: %w", retryableDriverError{safe: true}), koto.ClassOutage},
		{"pg connection failure", &pgconn.PgError{Code: "08006"}, koto.ClassOutage},
		{"pg too many connections", &pgconn.PgError{Code: "53300"}, koto.ClassOutage},
		{"pg admin shutdown", &pgconn.PgError{Code: "57P01"}, koto.ClassOutage},
		{"pg system error", fmt.Errorf("query: %w", &pgconn.PgError{Code: "58030"}), koto.ClassOutage},
		{"pg query canceled is not a shutdown", &pgconn.PgError{Code: "57014"}, koto.ClassRetryable},

		{"top mark wins: outage over poison", koto.Outage(koto.Poison(plain)), koto.ClassOutage},
		{"top mark wins: poison over outage", koto.Poison(koto.Outage(plain)), koto.ClassPoison},
		{"mark beats a generic outage", koto.Poison(dialErr), koto.ClassPoison},
		{"mark beats a recovered panic", koto.Outage(recovered), koto.ClassOutage},
		{"generic outage beats a recovered panic", errors.Join(recovered, dialErr), koto.ClassOutage},
		{"mark inside a join", errors.Join(plain, koto.Poison(plain)), koto.ClassPoison},
		{"first mark of a join wins", errors.Join(plain, koto.Outage(plain), koto.Poison(plain)), koto.ClassOutage},
		{"mark in a wrapped join", fmt.Errorf("x: %w", errors.Join(plain, koto.Poison(plain))), koto.ClassPoison},
		{"mark below a join below a mark", koto.Poison(errors.Join(koto.Outage(plain))), koto.ClassPoison},
	}
	for _, c := range cases {
		if got := koto.ClassOf(c.err); got != c.want {
			t.Errorf("%s: ClassOf(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestClassOfRealFailures: the errors that a real dial, a real
// PostgreSQL connection cut by the server and a real constraint violation
// produce are classed without any mark.
func TestClassOfRealFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	closed := closedAddr(t)
	_, dialErr := net.Dial("tcp", closed)
	_, connectErr := pgconn.Connect(ctx, "postgres://koto@"+closed+"/koto?connect_timeout=5")

	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	pgtest.Exec(t, pool, "CREATE TABLE "+schema+".t (id int PRIMARY KEY)")
	pgtest.Exec(t, pool, "INSERT INTO "+schema+".t VALUES (1)")
	_, uniqueErr := pool.Exec(ctx, "INSERT INTO "+schema+".t VALUES (1)")

	conn, err := pgx.ConnectConfig(ctx, pgtest.Config(t).ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	pgtest.Exec(t, pool, "SELECT pg_terminate_backend($1)", conn.PgConn().PID())
	_, terminatedErr := conn.Exec(ctx, "SELECT 1")
	_, afterErr := conn.Exec(ctx, "SELECT 1")

	for _, c := range []struct {
		name string
		err  error
		want koto.Class
	}{
		{"dial refused", dialErr, koto.ClassOutage},
		{"pgconn connect refused", connectErr, koto.ClassOutage},
		{"connection terminated by the server", terminatedErr, koto.ClassOutage},
		{"statement on the closed connection", afterErr, koto.ClassOutage},
		{"unique violation", uniqueErr, koto.ClassRetryable},
	} {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if got := koto.ClassOf(c.err); got != c.want {
			t.Errorf("%s: ClassOf(%T %v) = %v, want %v", c.name, c.err, c.err, got, c.want)
		}
	}
}

// closedAddr returns a local address that nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func panicThroughRecoverer() (err error) {
	_, err = wmmiddleware.Recoverer(func(*message.Message) ([]*message.Message, error) {
		panic("boom")
	})(message.NewMessage("1", nil))
	return err
}

func TestClassString(t *testing.T) {
	for class, want := range map[koto.Class]string{
		koto.ClassRetryable: "retryable", koto.ClassPoison: "poison", koto.ClassOutage: "outage",
	} {
		if class.String() != want {
			t.Errorf("%d.String() = %q, want %q", class, class.String(), want)
		}
	}
}
