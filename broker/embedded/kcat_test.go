package embedded_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestKcatOnSecuredBroker runs librdkafka, the client of Confluent's .NET,
// Python and Go libraries, through kcat against the broker with TLS and
// each SASL mechanism: it produces, consumes in a group that commits, and
// reads metadata; a wrong password is reported as an authentication
// failure.
func TestKcatOnSecuredBroker(t *testing.T) {
	kcat := kototest.Kcat(t)
	serverTLS, clientTLS := kototest.TLSConfigs(t)
	caFile, _ := kototest.TLSFiles(t, serverTLS)
	b := kototest.Embedded(t, embedded.WithTLS(serverTLS), embedded.WithPartitions(2),
		embedded.WithSASLUser(embedded.SASLPlain, "plain-user", "plain-pass"),
		embedded.WithSASLUser(embedded.SASLScramSHA256, "scram256-user", "scram256-pass"),
		embedded.WithSASLUser(embedded.SASLScramSHA512, "scram512-user", "scram512-pass"))
	admin := kadm.NewClient(newKgoClient(t, b.Addrs(), kgo.DialTLSConfig(clientTLS),
		kgo.SASL(plain.Auth{User: "plain-user", Pass: "plain-pass"}.AsMechanism())))
	for mechanism, user := range map[string]string{
		embedded.SASLPlain: "plain", embedded.SASLScramSHA256: "scram256", embedded.SASLScramSHA512: "scram512",
	} {
		t.Run(mechanism, func(t *testing.T) {
			k := kcatRun{t: t, path: kcat, args: []string{"-b", b.Addrs()[0], "-X", "security.protocol=SASL_SSL",
				"-X", "ssl.ca.location=" + caFile, "-X", "sasl.mechanisms=" + mechanism,
				"-X", "sasl.username=" + user + "-user"}}
			topic, group := kototest.Topic(t, "kcat"), kototest.Group(t, "kcat")
			want := []string{"k1=v1", "k2=v2", "k3=v3", "k4=v4"}

			k.ok("k1:v1\nk2:v2\nk3:v3\nk4:v4\n", "-X", "sasl.password="+user+"-pass", "-P", "-K", ":", "-t", topic)
			got := strings.Fields(k.ok("", "-X", "sasl.password="+user+"-pass", "-G", group,
				"-X", "auto.offset.reset=earliest", "-c", fmt.Sprint(len(want)), "-f", "%k=%s\n", topic))
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("kcat consumed %q in group %s, want %q", got, group, want)
			}
			assertCommitted(t, admin, group, topic, int64(len(want)))
			assertKcatMetadata(t, k.ok("", "-X", "sasl.password="+user+"-pass", "-L", "-J", "-t", topic), topic, 2)

			stderr := k.fail("-X", "sasl.password=wrong", "-L", "-m", "2")
			if !strings.Contains(stderr, "SASL authentication error: Authentication failed") || strings.Contains(stderr, "Handshake") {
				t.Errorf("kcat with a wrong password: stderr %q, want librdkafka's authentication error and no handshake error", stderr)
			}
		})
	}
}

// kcatRun runs kcat with its common arguments first.
type kcatRun struct {
	t    *testing.T
	path string
	args []string
}

func (k kcatRun) run(stdin string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.path, append(slices.Clone(k.args), args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// ok runs kcat, fails the test if kcat fails, and returns its output.
func (k kcatRun) ok(stdin string, args ...string) string {
	k.t.Helper()
	stdout, stderr, err := k.run(stdin, args...)
	if err != nil {
		k.t.Fatalf("kcat %q: %v\nstderr: %s", args, err, stderr)
	}
	return stdout
}

// fail runs kcat, fails the test unless kcat exits with an error, and
// returns what it wrote to stderr.
func (k kcatRun) fail(args ...string) string {
	k.t.Helper()
	_, stderr, err := k.run("", args...)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		k.t.Fatalf("kcat %q: %v, want a failed exit; stderr: %s", args, err, stderr)
	}
	return stderr
}

// assertKcatMetadata checks kcat's JSON metadata listing: one broker and
// topic with the given partitions.
func assertKcatMetadata(t *testing.T, out, topic string, partitions int) {
	t.Helper()
	var md struct {
		Brokers []struct{ Name string }
		Topics  []struct {
			Topic      string
			Partitions []struct{ Partition int }
		}
	}
	if err := json.Unmarshal([]byte(out), &md); err != nil {
		t.Fatalf("kcat -L -J output %q: %v", out, err)
	}
	if len(md.Brokers) != 1 || len(md.Topics) != 1 || md.Topics[0].Topic != topic || len(md.Topics[0].Partitions) != partitions {
		t.Errorf("kcat metadata %s: want one broker and topic %s with %d partitions", out, topic, partitions)
	}
}

// assertCommitted checks that group committed offsets adding up to want on
// topic.
func assertCommitted(t *testing.T, admin *kadm.Client, group, topic string, want int64) {
	t.Helper()
	offsets, err := admin.FetchOffsetsForTopics(kototest.Context(t), group, topic)
	if err == nil {
		err = offsets.Error()
	}
	if err != nil {
		t.Fatalf("offsets of group %s: %v", group, err)
	}
	var total int64
	offsets.Each(func(o kadm.OffsetResponse) { total += max(o.At, 0) })
	if total != want {
		t.Errorf("group %s committed %d records of %s, want %d", group, total, topic, want)
	}
}
