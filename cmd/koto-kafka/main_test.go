package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/koto-dev/watermill-koto/internal/cli"
	"github.com/koto-dev/watermill-koto/kototest"
)

func TestMain(m *testing.M) {
	kototest.VerifyTestMain(m)
}

func TestRunPrintsAddressAndStopsOnCancel(t *testing.T) {
	out, stop := start(t, "-port", "0", "-data-dir", t.TempDir(), "-partitions", "2", "-topics", "a,b")
	assertTopics(t, out, 2, "a", "b")
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestRunSecured starts the broker with TLS and two SASL users, and logs in
// as each of them over TLS.
func TestRunSecured(t *testing.T) {
	serverTLS, clientTLS := kototest.TLSConfigs(t)
	certFile, keyFile := kototest.TLSFiles(t, serverTLS)
	out, stop := start(t, "-port", "0", "-tls-cert", certFile, "-tls-key", keyFile,
		"-sasl-user", "SCRAM-SHA-512:koto:s3cret:with:colons", "-sasl-user", "plain:admin:admin")
	defer stop()
	for name, mech := range map[string]sasl.Mechanism{
		"SCRAM-SHA-512": scram.Auth{User: "koto", Pass: "s3cret:with:colons"}.AsSha512Mechanism(),
		"PLAIN":         plain.Auth{User: "admin", Pass: "admin"}.AsMechanism(),
	} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(address(out)...), kgo.DialTLSConfig(clientTLS), kgo.SASL(mech))
		if err != nil {
			t.Fatalf("kgo.NewClient: %v", err)
		}
		if err := cl.Ping(kototest.Context(t)); err != nil {
			t.Errorf("ping over TLS as the %s user: %v", name, err)
		}
		cl.Close()
	}
}

// start runs the command with args until the test ends or stop is called,
// and returns what it printed once it printed the broker address.
func start(t *testing.T, args ...string) (out string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr kototest.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, &stdout, &stderr) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() { _ = stop() })

	deadline := time.After(30 * time.Second)
	for !strings.Contains(stdout.String(), "listening on 127.0.0.1:") {
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v (stderr: %s)", err, stderr.String())
		case <-deadline:
			t.Fatalf("no address printed; stdout %q", stdout.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return stdout.String(), stop
}

// address returns the broker addresses that run printed first in out.
func address(out string) []string {
	_, addr, _ := strings.Cut(strings.TrimSpace(strings.SplitN(out, "\n", 2)[0]), "listening on ")
	return strings.Split(addr, ",")
}

// assertTopics checks, on the broker whose address run printed in out, that
// each of names exists with the given number of partitions: the -topics and
// -partitions flags reached the broker.
func assertTopics(t *testing.T, out string, partitions int, names ...string) {
	t.Helper()
	addr := address(out)
	details, err := kototest.Admin(t, addr).ListTopics(kototest.Context(t), names...)
	if err != nil {
		t.Fatalf("list topics on %s: %v", addr, err)
	}
	for _, name := range names {
		d, ok := details[name]
		if !ok || d.Err != nil {
			t.Errorf("topic %s on %s: exists %v, error %v; want it created by -topics", name, addr, ok, d.Err)
			continue
		}
		if n := len(d.Partitions); n != partitions {
			t.Errorf("topic %s has %d partitions, want %d (-partitions)", name, n, partitions)
		}
	}
}

// TestRunRejectsBadFlags: a command line run cannot use fails; a value the
// broker refuses is a usage error (exit status 2) naming its option.
func TestRunRejectsBadFlags(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		option string // the embedded.Start option the usage error names, if any
	}{
		{[]string{"-partitions", "-1"}, "WithPartitions"},
		{[]string{"-port", "-5"}, "WithPort"},
		{[]string{"-topics", "bad topic!"}, "WithTopics"},
		{[]string{"-no-such-flag"}, ""},
		{[]string{"-tls-cert", "broker.crt"}, ""},
		{[]string{"-tls-cert", "missing.crt", "-tls-key", "missing.key"}, ""},
		{[]string{"-sasl-user", "PLAIN:user-without-password"}, ""},
		{[]string{"-sasl-user", "PLAIN:user:"}, "WithSASLUser"},
		{[]string{"-sasl-user", "GSSAPI:user:password"}, "WithSASLUser"},
	} {
		var out kototest.Buffer
		err := run(context.Background(), tt.args, &out, &out)
		if err == nil {
			t.Errorf("run(%q) succeeded, want an error", tt.args)
			continue
		}
		if tt.option == "" {
			continue
		}
		var stderr kototest.Buffer
		if code := cli.ExitCode(err, "koto-kafka", &stderr); code != 2 || !strings.Contains(stderr.String(), "embedded.Start."+tt.option+" ") {
			t.Errorf("run(%q): exit status %d, stderr %q; want 2 and a line naming %s", tt.args, code, stderr.String(), tt.option)
		}
	}
}
