package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	wkoto "github.com/koto-dev/watermill-koto" // koto is the test's runner of the command

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/internal/cli"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/topics"
)

// binDir holds the binaries TestMain builds: koto-kafka, koto-bench and
// koto.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "koto-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	for _, pkg := range []string{"../koto-kafka", "../koto-bench", "."} {
		out, err := exec.Command("go", "build", "-o", dir, pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := kototest.WaitNoLeaks(kototest.DefaultTimeout); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startKotoKafka runs the koto-kafka binary on a free port until the test
// ends and returns its address.
func startKotoKafka(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "koto-kafka"), "-port", "0", "-partitions", "2")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start koto-kafka: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("koto-kafka: %v", err)
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "Kafka broker listening on "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return a
	case <-time.After(kototest.DefaultTimeout):
		t.Fatal("koto-kafka printed no address")
		return ""
	}
}

// payments runs a consumer of orders.order-placed in group, behind
// middleware.Defaults that dead-letters the first failure, that fails
// every message with "amount is negative" until fixed, and records what it
// handles after.
type payments struct {
	mu      sync.Mutex
	fixed   bool
	handled []string
}

func (p *payments) fix() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fixed = true
}

func (p *payments) handledUUIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.handled)
}

func (p *payments) handle(msg *message.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.fixed {
		return errors.New("amount is negative")
	}
	p.handled = append(p.handled, msg.UUID)
	return nil
}

func (p *payments) run(t *testing.T, cfg broker.Config, group, topic string) {
	t.Helper()
	p.runWith(t, cfg, cfg, group, topic)
}

// runWith runs payments reading with subCfg and sending its dead letters
// with pubCfg.
func (p *payments) runWith(t *testing.T, pubCfg, subCfg broker.Config, group, topic string) {
	t.Helper()
	pub := kototest.NewPublisher(t, pubCfg)
	subCfg.ConsumerGroup = group
	sub := kototest.NewSubscriber(t, subCfg)
	chain, err := middleware.Defaults(middleware.Config{
		Publisher:  pub,
		Logger:     slog.New(slog.DiscardHandler),
		DeadLetter: middleware.DeadLetterConfig{MaxAttempts: 1}, // dead-letter the first failure
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the router's stop, registered below
		if err := chain.Close(kototest.Context(t)); err != nil {
			t.Errorf("chain close: %v", err)
		}
	})
	router := kototest.NewRouter(t, nil)
	router.AddConsumerHandler(group, topic, sub, p.handle).AddMiddleware(chain.Middlewares()...)
	kototest.RunRouter(t, router)
}

// runPayments starts koto-kafka and runs payments on a new topic and
// group, whose dead-letter topic it creates.
func runPayments(t *testing.T) (addr string, cfg broker.Config, group, topic string, p *payments) {
	t.Helper()
	addr = startKotoKafka(t)
	cfg = broker.Config{Brokers: []string{addr}}
	group = kototest.Group(t, "payments.order-placed-consumer")
	topic = kototest.Topic(t, "orders.order-placed")
	kototest.Provision(t, cfg, topic, topics.DeadLetter(group))
	p = &payments{}
	p.run(t, cfg, group, topic)
	return addr, cfg, group, topic, p
}

// koto runs the command in process with KAFKA_BROKERS set to brokers and
// returns its stdout, stderr and exit status.
func koto(t *testing.T, brokers string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return kotoEnv(t, map[string]string{envBrokers: brokers}, args...)
}

// kotoEnv runs the command in process with env as its environment.
func kotoEnv(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string { return env[k] }
	err := run(kototest.Context(t), cmdIO{stdout: &out, stderr: &errOut, getenv: getenv}, args)
	code = cli.ExitCode(err, "koto", &errOut)
	return out.String(), errOut.String(), code
}

// TestDLQAgainstKotoKafka runs list, show, replay -dry-run and replay
// against the koto-kafka binary, on dead letters that the middleware
// wrote.
func TestDLQAgainstKotoKafka(t *testing.T) {
	addr, cfg, group, topic, p := runPayments(t)
	uuids := publishOrders(t, cfg, topic, `{"order":"o-1","amount":-5}`, "not json \x00")

	var listed []map[string]any
	waitForList(t, addr, group, &listed, 2)

	out, _, code := koto(t, addr, "dlq", "list", "-group", group)
	for _, want := range []string{"POSITION", "FAILED AT", "order-placed", "amount is negative", uuids[0], uuids[1], topic, "2 dead letters in " + topics.DeadLetter(group) + " (0 replayed"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("list (exit %d) lacks %q:\n%s", code, want, out)
		}
	}

	jsonLetter := letterAt(t, listed, uuids[0])
	pos := fmt.Sprintf("%v/%v", jsonLetter["partition"], jsonLetter["offset"])
	out, _, code = koto(t, addr, "dlq", "show", pos, "-group", group) // flags after the argument
	for _, want := range []string{"uuid:", uuids[0], "reason:", "amount is negative", "payload (27 bytes, JSON):", "  \"order\": \"o-1\",", "dead_letter_original_topic: " + topic} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("show %s (exit %d) lacks %q:\n%s", pos, code, want, out)
		}
	}
	out, _, code = koto(t, addr, "dlq", "show", "-group", group, uuids[1])
	if code != 0 || !strings.Contains(out, `payload (10 bytes, not JSON, escaped):`+"\n"+`"not json \x00"`) {
		t.Fatalf("show %s (exit %d): want the payload escaped:\n%s", uuids[1], code, out)
	}
	out, _, code = koto(t, addr, "dlq", "show", "-group", group, "-json", uuids[0])
	var shown struct {
		UUID    string         `json:"uuid"`
		Payload map[string]any `json:"payload"`
	}
	if err := json.Unmarshal([]byte(out), &shown); code != 0 || err != nil || shown.UUID != uuids[0] || shown.Payload["order"] != "o-1" {
		t.Fatalf("show -json (exit %d, %v): %s", code, err, out)
	}

	for _, tc := range []struct {
		arg, want string
		code      int
	}{
		{fmt.Sprintf("%v/999", jsonLetter["partition"]), "no such dead letter", 1},
		{"99/0", "no such dead letter", 1},
		{"0/99999999999999999999", "out of range", 2},
		{"no-such-uuid", `no such dead letter with UUID "no-such-uuid"`, 1},
	} {
		if _, stderr, code := koto(t, addr, "dlq", "show", "-group", group, tc.arg); code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Fatalf("show %s: exit %d, stderr %q; want exit %d with %q", tc.arg, code, stderr, tc.code, tc.want)
		}
	}

	p.fix()
	out, _, code = koto(t, addr, "dlq", "replay", "-group", group, "-reason", "NEGATIVE", "-dry-run")
	if code != 0 || !strings.Contains(out, "dry run: would send 2 dead letters from") || !strings.Contains(out, "TO") || !strings.Contains(out, uuids[0]) {
		t.Fatalf("replay -dry-run (exit %d):\n%s", code, out)
	}
	if got := p.handledUUIDs(); len(got) != 0 {
		t.Fatalf("the dry run sent %v", got)
	}
	out, stderr, code := koto(t, addr, "dlq", "replay", "-group", group, "-uuid", uuids[0], "-progress", "-v")
	if code != 0 || !strings.Contains(out, "sent 1 dead letter from") || !strings.Contains(out, "sent "+pos+" "+uuids[0]+" to "+topic+"/") ||
		!strings.Contains(stderr, "100% ") {
		t.Fatalf("replay -uuid (exit %d):\n%s\nstderr:\n%s", code, out, stderr)
	}
	out, _, code = koto(t, addr, "dlq", "replay", "-group", group, "-json")
	var report struct {
		Result struct{ Sent, AlreadyReplayed int }
		Sent   []struct {
			UUID    string `json:"uuid"`
			ToTopic string `json:"to_topic"`
		} `json:"sent"`
	}
	if err := json.Unmarshal([]byte(out), &report); code != 0 || err != nil || report.Result.Sent != 1 || report.Result.AlreadyReplayed != 1 ||
		len(report.Sent) != 1 || report.Sent[0].UUID != uuids[1] || report.Sent[0].ToTopic != topic {
		t.Fatalf("replay -json (exit %d, %v): %s", code, err, out)
	}
	if out, _, code = koto(t, addr, "dlq", "replay", "-group", group); code != 0 || !strings.Contains(out, "sent 0 dead letters from") {
		t.Fatalf("replay once more (exit %d): %s", code, out)
	}
	kototest.WaitFor(t, "the fixed consumer to handle both replays", func() bool { return len(p.handledUUIDs()) == 2 })
	if got := p.handledUUIDs(); !slices.Equal(sortedCopy(got), sortedCopy(uuids)) {
		t.Fatalf("handled %v, want %v", got, uuids)
	}

	// The built binary, with the brokers in the environment.
	cmd := exec.Command(filepath.Join(binDir, "koto"), "dlq", "list", "-group", group, "-json")
	cmd.Env = append(os.Environ(), envBrokers+"="+addr)
	bin, err := cmd.Output()
	if err != nil {
		t.Fatalf("koto binary: %v", err)
	}
	var all []map[string]any
	if err := json.Unmarshal(bin, &all); err != nil || len(all) != 2 || all[0]["replayed"] != true || all[1]["replayed"] != true {
		t.Fatalf("koto dlq list -json after the replays: %v\n%s", err, bin)
	}
}

// TestUsageErrors: bad command lines exit with status 2 and say why,
// before connecting anywhere; a file that a flag names and that cannot be
// read exits 1.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command given; commands: console, dlq, outbox"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"dlq"}, "no subcommand given; subcommands: discard, list, replay, show"},
		{[]string{"dlq", "purge"}, `unknown subcommand "purge"`},
		{[]string{"dlq", "list"}, "-group is required"},
		{[]string{"dlq", "list", "-group", "g", "-brokers", ""}, "no Kafka brokers"},
		{[]string{"dlq", "list", "-group", "g", "-brokers", "nohost"}, "want host:port"},
		{[]string{"dlq", "list", "-group", "g", "-since", "yesterday"}, "neither RFC 3339"},
		{[]string{"dlq", "list", "-group", "g", "-since", "1h", "-until", "2h"}, "is not before Until"},
		{[]string{"dlq", "list", "-group", "g", "extra"}, "takes no arguments"},
		{[]string{"dlq", "show", "-group", "g"}, "takes one argument"},
		{[]string{"dlq", "replay", "-group", "g", "-batch", "-1"}, "-batch is -1"},
		{[]string{"dlq", "list", "-group", "g", "-sasl-user", "u"}, "no password"},
		{[]string{"dlq", "list", "-group", "g", "-sasl-user", "u", "-sasl-password", "p", "-sasl-mechanism", "GSSAPI"}, "Mechanism is \"GSSAPI\""},
		{[]string{"dlq", "list", "-group", "g", "-no-such-flag"}, "flag provided but not defined"},
		{[]string{"outbox"}, "no subcommand given; subcommands: status"},
		{[]string{"outbox", "status", "extra"}, "takes no arguments"},
		{[]string{"outbox", "status", "-database-url", "postgres://%zz"}, "-database-url"},
		{[]string{"outbox", "status", "-schema", ""}, "-schema is empty"},
		{[]string{"outbox", "status", "-table", strings.Repeat("t", 56)}, "shorten it"},
		{[]string{"console", "-listen", "0.0.0.0:0"}, "beyond localhost, where anyone could replay: set a token"},
		{[]string{"console", "-listen", "192.0.2.1:8080", "-read-only"}, "beyond localhost"},
		{[]string{"console", "-token", "no-secret"}, "a token is NAME:SECRET"},
	} {
		_, stderr, code := koto(t, "127.0.0.1:1", tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") > 3 {
			t.Errorf("koto %q: exit %d, stderr %q; want exit 2 with %q, in at most 3 lines", tc.args, code, stderr, tc.want)
		}
	}
	if _, stderr, code := koto(t, "127.0.0.1:1", "dlq", "list", "-group", "g", "-tls-ca", "/nonexistent.pem"); code != 1 || !strings.Contains(stderr, "no such file") {
		t.Errorf("-tls-ca of a missing file: exit %d, stderr %q; want exit 1 saying so", code, stderr)
	}
}

func publishOrders(t *testing.T, cfg broker.Config, topic string, payloads ...string) []string {
	t.Helper()
	pub := kototest.NewPublisher(t, cfg)
	var uuids []string
	for _, p := range payloads {
		msg := message.NewMessage(watermill.NewUUID(), []byte(p))
		msg.Metadata.Set(wkoto.TypeNameMetadataKey, "order-placed")
		if err := pub.Publish(topic, msg); err != nil {
			t.Fatal(err)
		}
		uuids = append(uuids, msg.UUID)
	}
	return uuids
}

// waitForList runs list -json until it shows n dead letters.
func waitForList(t *testing.T, addr, group string, listed *[]map[string]any, n int) {
	t.Helper()
	kototest.WaitFor(t, "the dead letters", func() bool {
		out, stderr, code := koto(t, addr, "dlq", "list", "-group", group, "-json")
		if code != 0 {
			t.Fatalf("list -json: exit %d: %s", code, stderr)
		}
		if err := json.Unmarshal([]byte(out), listed); err != nil {
			t.Fatalf("list -json: %v\n%s", err, out)
		}
		return len(*listed) >= n
	})
}

func letterAt(t *testing.T, listed []map[string]any, uuid string) map[string]any {
	t.Helper()
	for _, l := range listed {
		if l["uuid"] == uuid {
			return l
		}
	}
	t.Fatalf("no dead letter %s in %v", uuid, listed)
	return nil
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestSASLAndTLSFlags lists the dead letters of a broker that takes only
// TLS connections authenticated with SCRAM, trusting its certificate from
// a PEM file and reading the password from the environment.
func TestSASLAndTLSFlags(t *testing.T) {
	serverTLS, clientTLS := kototest.TLSConfigs(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: serverTLS.Certificates[0].Certificate[0]})
	if err := os.WriteFile(ca, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := embedded.Start(kototest.Context(t), embedded.WithTLS(serverTLS), embedded.WithSASLUser(embedded.SASLScramSHA512, "ops", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	group := kototest.Group(t, "payments")
	kototest.Provision(t, broker.Config{Brokers: b.Addrs(), TLS: clientTLS,
		SASL: broker.SASLConfig{Mechanism: sarama.SASLTypeSCRAMSHA512, User: "ops", Password: "s3cret"}}, topics.DeadLetter(group))
	args := []string{"dlq", "list", "-group", group, "-brokers", b.Addrs()[0],
		"-tls-ca", ca, "-sasl-user", "ops", "-sasl-mechanism", "scram-sha-512"}

	out, stderr, code := kotoEnv(t, map[string]string{envSASLPassword: "s3cret"}, args...)
	if code != 0 || !strings.Contains(out, "0 dead letters in") {
		t.Fatalf("list over SASL and TLS: exit %d\n%s%s", code, out, stderr)
	}
	_, stderr, code = kotoEnv(t, map[string]string{envSASLPassword: "wrong"}, args...)
	if code != 1 || !strings.Contains(stderr, "rejected") {
		t.Fatalf("list with a wrong password: exit %d, stderr %q; want the rejection", code, stderr)
	}
	_, stderr, code = kotoEnv(t, map[string]string{envSASLPassword: "s3cret"}, slices.Concat(args[:6], []string{"-tls"}, args[8:])...)
	if code != 1 || !strings.Contains(stderr, "certificate") {
		t.Fatalf("list over TLS without trusting the broker's certificate: exit %d, stderr %q; want a failure", code, stderr)
	}
}
