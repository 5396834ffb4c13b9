package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	wkoto "github.com/koto-dev/watermill-koto"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

// runBinary runs a binary that TestMain built and returns its stdout,
// stderr and exit status.
func runBinary(t *testing.T, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(kototest.Context(t), filepath.Join(binDir, name), args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s %q: %v", name, args, err)
	}
	return out.String(), errOut.String(), code
}

// TestHelpAndBadFlags: -h prints the usage on stdout and exits 0; a bad
// flag exits 2 with the error and a pointer at -h, in at most three lines
// on stderr, not the usage.
func TestHelpAndBadFlags(t *testing.T) {
	for _, cmd := range [][]string{
		{"koto"}, {"koto", "dlq"}, {"koto", "dlq", "list"}, {"koto", "dlq", "show"}, {"koto", "dlq", "replay"},
		{"koto", "outbox"}, {"koto", "outbox", "status"}, {"koto", "console"},
		{"koto-kafka"}, {"koto-bench"}, {"koto-bench", "store"}, {"koto-bench", "all"},
	} {
		name := strings.Join(cmd, " ")
		stdout, stderr, code := runBinary(t, cmd[0], append(cmd[1:], "-h")...)
		if code != 0 || !strings.HasPrefix(stdout, "usage: "+name) || stderr != "" {
			t.Errorf("%s -h: exit %d, stdout %q, stderr %q; want exit 0 and the usage on stdout", name, code, stdout, stderr)
		}
		stdout, stderr, code = runBinary(t, cmd[0], append(cmd[1:], "-no-such-flag")...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != 2 || stdout != "" || len(lines) > 3 || !strings.Contains(stderr, "-no-such-flag") ||
			!strings.Contains(stderr, "'"+name+" -h'") {
			t.Errorf("%s -no-such-flag: exit %d, stdout %q, stderr (%d lines) %q; want exit 2 with the error and '%s -h' in at most 3 lines",
				name, code, stdout, len(lines), stderr, name)
		}
	}
}

// TestFlagHelpNamesTheVariable: a flag whose default is an environment
// variable names it, and shows no second default with its value.
func TestFlagHelpNamesTheVariable(t *testing.T) {
	cmd := exec.Command(filepath.Join(binDir, "koto"), "dlq", "list", "-h")
	cmd.Env = append(cmd.Environ(), envBrokers+"=127.0.0.1:9092", envSASLUser+"=alice")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(default $" + envBrokers + ")", "(default $" + envSASLUser + ")"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("koto dlq list -h lacks %q:\n%s", want, out)
		}
	}
	for _, value := range []string{"127.0.0.1:9092", "alice"} {
		if strings.Contains(string(out), value) {
			t.Errorf("koto dlq list -h shows the value %q of a variable:\n%s", value, out)
		}
	}
}

// TestDLQListWithoutTopic: listing a group that has no dead-letter topic,
// on koto-kafka, which creates the topics clients ask about, says so with
// the groups that have one, exits 1, and does not create the topic.
func TestDLQListWithoutTopic(t *testing.T) {
	addr := startKotoKafka(t)
	cfg := broker.Config{Brokers: []string{addr}}
	known := kototest.Group(t, "payments.order-placed-consumer")
	kototest.Provision(t, cfg, topics.DeadLetter(known))
	missing := kototest.Group(t, "no.such-consumer")

	for _, args := range [][]string{{"list"}, {"show", "0/0"}, {"replay"}} {
		out, stderr, code := koto(t, addr, append([]string{"dlq"}, append(args, "-group", missing)...)...)
		if code != 1 || out != "" || !strings.Contains(stderr, "no such dead-letter topic "+topics.DeadLetter(missing)) ||
			!strings.Contains(stderr, "groups with a dead-letter topic: ") || !strings.Contains(stderr, known) {
			t.Errorf("dlq %s of a group without dead letters: exit %d, stdout %q, stderr %q; want exit 1 naming the topic and %s",
				args[0], code, out, stderr, known)
		}
	}
	if kototest.TopicExists(t, []string{addr}, topics.DeadLetter(missing)) {
		t.Errorf("koto dlq created %s", topics.DeadLetter(missing))
	}
}

// TestDLQShowRepeatedDeliveries: one poison message published three times
// with one UUID has three dead letters, none from a replay: show by UUID
// says so and points at their positions.
func TestDLQShowRepeatedDeliveries(t *testing.T) {
	addr, cfg, group, topic, _ := runPayments(t)
	pub := kototest.NewPublisher(t, cfg)
	uuid := watermill.NewUUID()
	for range 3 {
		msg := message.NewMessage(uuid, []byte(`{"order":"o-1","amount":-5}`))
		msg.Metadata.Set(wkoto.TypeNameMetadataKey, "order-placed")
		if err := pub.Publish(topic, msg); err != nil {
			t.Fatal(err)
		}
	}
	var listed []map[string]any
	waitForList(t, addr, group, &listed, 3)

	_, stderr, code := koto(t, addr, "dlq", "show", "-group", group, uuid)
	if code != 1 || !strings.Contains(stderr, "3 deliveries of it failed, none of them a replay") || strings.Contains(stderr, "after a replay") ||
		strings.Count(stderr, "/") < 3 {
		t.Errorf("show of a UUID dead-lettered three times: exit %d, stderr %q; want exit 1, what happened and the positions", code, stderr)
	}
}
