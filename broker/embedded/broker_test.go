package embedded_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/kototest"
)

func TestStartListensOnLoopbackOnly(t *testing.T) {
	b := kototest.Embedded(t)
	addrs := b.Addrs()
	if len(addrs) != 1 {
		t.Fatalf("Addrs() = %v, want one address", addrs)
	}
	host, port, err := net.SplitHostPort(addrs[0])
	if err != nil {
		t.Fatalf("Addrs()[0] = %q: %v", addrs[0], err)
	}
	if host != "127.0.0.1" || port == "0" {
		t.Fatalf("Addrs()[0] = %q, want 127.0.0.1 and a real port", addrs[0])
	}
}

// TestStartRejectsBadOptions: an option value Start cannot use fails it
// with koto.ErrInvalidConfig, naming the option and what to change.
func TestStartRejectsBadOptions(t *testing.T) {
	const prefix = "invalid configuration: embedded.Start."
	tests := map[string]struct {
		opt  embedded.Option
		want string
	}{
		"negative partitions": {embedded.WithPartitions(-1), "WithPartitions is negative (-1); use 0 for the default (3) or a positive partition count"},
		"negative port":       {embedded.WithPort(-1), "WithPort (-1) is out of range; use 0 for a free port or a port in 1..65535"},
		"port too large":      {embedded.WithPort(70000), "WithPort (70000) is out of range; use 0 for a free port or a port in 1..65535"},
		"invalid topic":       {embedded.WithTopics("ok", "bad topic!"), `WithTopics invalid Kafka topic name "bad topic!": `},
		"SASL mechanism":      {embedded.WithSASLUser("GSSAPI", "u", "p"), `WithSASLUser ("GSSAPI", "u", …) has an unknown mechanism; use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`},
		"SASL password":       {embedded.WithSASLUser(embedded.SASLPlain, "u", ""), `WithSASLUser ("PLAIN", "u", …) has an empty user name or password; set both`},
		"TLS without cert":    {embedded.WithTLS(&tls.Config{}), "WithTLS has no server certificate; set the tls.Config's Certificates or GetCertificate"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			b, err := embedded.Start(context.Background(), tt.opt)
			if err == nil {
				_ = b.Close()
				t.Fatal("Start succeeded, want an error")
			}
			if !errors.Is(err, koto.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), prefix+tt.want) {
				t.Fatalf("Start: %v, want koto.ErrInvalidConfig starting %q", err, prefix+tt.want)
			}
		})
	}
}

// TestStartReportsEveryBadOption: Start does not stop at the first option
// it refuses; each is a line of the one error.
func TestStartReportsEveryBadOption(t *testing.T) {
	_, err := embedded.Start(context.Background(), embedded.WithPartitions(-1), embedded.WithPort(-1),
		embedded.WithTopics("a b", "c d"), embedded.WithSASLUser("GSSAPI", "", ""), embedded.WithTLS(&tls.Config{}))
	if !errors.Is(err, koto.ErrInvalidConfig) {
		t.Fatalf("Start: %v, want koto.ErrInvalidConfig", err)
	}
	var options []string
	for _, line := range strings.Split(err.Error(), "\n") {
		option, _, _ := strings.Cut(strings.TrimPrefix(line, "invalid configuration: embedded.Start."), " ")
		options = append(options, option)
	}
	slices.Sort(options)
	want := []string{"WithPartitions", "WithPort", "WithSASLUser", "WithSASLUser", "WithTLS", "WithTopics", "WithTopics"}
	if !slices.Equal(options, want) {
		t.Errorf("Start reported the options %v, want %v:\n%v", options, want, err)
	}
}

func TestStartHonoursCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b, err := embedded.Start(ctx)
	if !errors.Is(err, context.Canceled) {
		if b != nil {
			_ = b.Close()
		}
		t.Fatalf("Start with a cancelled context: err = %v, want context.Canceled", err)
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	b, err := embedded.Start(context.Background())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	for i := range 3 {
		if err := b.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
}

func TestTopicsGetConfiguredPartitions(t *testing.T) {
	b := kototest.Embedded(t, embedded.WithPartitions(4), embedded.WithTopics("orders.order-placed", "payments.paid"))
	produceValues(t, b.Addrs(), "auto-created", "x")
	checkPartitions(t, b, 4, "orders.order-placed", "payments.paid", "auto-created")
}

// TestZeroPartitionsMeansTheDefault: WithPartitions(0) is the default,
// broker.DefaultPartitions, as a zero field of a Config is.
func TestZeroPartitionsMeansTheDefault(t *testing.T) {
	b := kototest.Embedded(t, embedded.WithPartitions(0), embedded.WithTopics("orders.order-placed"))
	checkPartitions(t, b, broker.DefaultPartitions, "orders.order-placed")
}

// checkPartitions checks that every topic of names has want partitions.
func checkPartitions(t *testing.T, b *embedded.Broker, want int, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
	defer cancel()
	adm := kototest.Admin(t, b.Addrs())
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	for _, name := range names {
		d, ok := details[name]
		if !ok || d.Err != nil {
			t.Errorf("topic %s: missing or error %v", name, d.Err)
			continue
		}
		if got := len(d.Partitions); got != want {
			t.Errorf("topic %s has %d partitions, want %d", name, got, want)
		}
	}
}
