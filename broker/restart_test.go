package broker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// memberEnv, set in the environment of the test binary, makes it run a
// consumer of the memberConfig it holds, in JSON, instead of the tests:
// the process that the restart tests kill.
const memberEnv = "KOTO_BROKER_RESTART_MEMBER"

func init() {
	if cfg := os.Getenv(memberEnv); cfg != "" {
		os.Exit(runMember(cfg))
	}
}

// memberConfig is the consumer a member process runs.
type memberConfig struct {
	Brokers         []string
	Group, Topic    string
	InstanceID      string        // broker.Config.GroupInstanceID
	SessionTimeout  time.Duration // sarama's Consumer.Group.Session.Timeout; 0: its default
	HeartbeatPeriod time.Duration // sarama's Consumer.Group.Heartbeat.Interval; 0: its default
}

// runMember consumes as cfg says, printing a line per message and acking
// none, until its standard input ends.
func runMember(cfg string) int {
	var mc memberConfig
	if err := json.Unmarshal([]byte(cfg), &mc); err != nil {
		fmt.Fprintln(os.Stderr, "member:", err)
		return 2
	}
	sub, err := broker.NewSubscriber(broker.Config{Brokers: mc.Brokers, ConsumerGroup: mc.Group, GroupInstanceID: mc.InstanceID,
		Sarama: func(sc *sarama.Config) {
			if mc.SessionTimeout > 0 {
				sc.Consumer.Group.Session.Timeout = mc.SessionTimeout
			}
			if mc.HeartbeatPeriod > 0 {
				sc.Consumer.Group.Heartbeat.Interval = mc.HeartbeatPeriod
			}
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "member:", err)
		return 1
	}
	defer sub.Close()
	msgs, err := sub.Subscribe(context.Background(), mc.Topic)
	if err != nil {
		fmt.Fprintln(os.Stderr, "member:", err)
		return 1
	}
	go func() {
		for msg := range msgs {
			fmt.Println("message", msg.UUID)
		}
	}()
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// member is a consumer process of the test binary.
type member struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	first chan struct{} // closed at its first message
	ended chan struct{} // closed once its output is read to the end
}

// startMember starts a member process of cfg; it is killed when tb ends,
// if it still runs.
func startMember(tb testing.TB, cfg memberConfig) *member {
	tb.Helper()
	data, err := json.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), memberEnv+"="+string(data))
	cmd.Stderr = os.Stderr
	m := &member{cmd: cmd, first: make(chan struct{}), ended: make(chan struct{})}
	if m.stdin, err = cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start a member process: %v", err)
	}
	go m.read(stdout)
	tb.Cleanup(m.kill)
	return m
}

// read follows the member's output.
func (m *member) read(stdout io.Reader) {
	defer close(m.ended)
	sc := bufio.NewScanner(stdout)
	for first := true; sc.Scan(); {
		if first {
			close(m.first)
			first = false
		}
	}
}

// waitFirst waits for the member's first message.
func (m *member) waitFirst(tb testing.TB, what string) {
	tb.Helper()
	select {
	case <-m.first:
	case <-m.ended:
		tb.Fatalf("%s: the member process ended before it got a message", what)
	case <-time.After(kototest.DefaultTimeout):
		tb.Fatalf("%s: no message within %v", what, kototest.DefaultTimeout)
	}
}

// kill kills the member with SIGKILL, as the kernel's OOM killer or a
// failed node would, and waits for it to end.
func (m *member) kill() {
	_ = m.cmd.Process.Kill()
	<-m.ended
	_ = m.cmd.Wait()
}

// restartTopic returns a topic of 3 partitions with a record on each, for
// a new consumer group.
func restartTopic(tb testing.TB, brokers []string) (topic, group string) {
	tb.Helper()
	topic = kototest.NewTopic(tb, provisionCfg(brokers, 3), "restart")
	recs := make([]*kgo.Record, 30)
	for i := range recs {
		recs[i] = kototest.Record(topic, watermill.NewUUID(), fmt.Sprintf("key-%d", i), nil)
	}
	kototest.Produce(tb, brokers, recs)
	return topic, kototest.Group(tb, "restart")
}

// killAndRestart starts a member of cfg, kills it once it consumes, starts
// another and returns the time from the kill to the new member's first
// message.
func killAndRestart(tb testing.TB, cfg memberConfig) time.Duration {
	tb.Helper()
	first := startMember(tb, cfg)
	first.waitFirst(tb, "the first member")
	killed := time.Now()
	first.kill()
	second := startMember(tb, cfg)
	second.waitFirst(tb, "the member started after the kill")
	d := time.Since(killed)
	second.kill()
	return d
}

// TestStaticMemberResumesAtOnce kills a consumer process with
// Config.GroupInstanceID whose group's session lasts two minutes and
// starts it again: the new process gets the partitions, and a message,
// within the test's 30-second wait, long before the dead member's session
// would end. Without static membership the group waits for that session,
// or for the rebalance timeout, a minute.
func TestStaticMemberResumesAtOnce(t *testing.T) {
	brokers := kototest.Brokers(t)
	topic, group := restartTopic(t, brokers)
	d := killAndRestart(t, memberConfig{Brokers: brokers, Group: group, Topic: topic,
		InstanceID: "restart-test-0", SessionTimeout: 2 * time.Minute})
	t.Logf("from the kill to the restarted member's first message: %v", d.Round(time.Millisecond))
}

// BenchmarkRestartPause measures, for a consumer process killed with
// SIGKILL and started again, the time from the kill to the new process's
// first message: with dynamic membership on sarama's default session
// timeout (10s) and on the shortest the broker allows by default (6s,
// heartbeats every 2s), and with static membership (Config.GroupInstanceID)
// on the default. It reports s/restart; ns/op is the whole iteration.
func BenchmarkRestartPause(b *testing.B) {
	brokers := kototest.Brokers(b)
	for _, tc := range []struct {
		name       string
		instanceID string
		session    time.Duration
		heartbeat  time.Duration
	}{
		{"dynamic", "", 0, 0},
		{"dynamic-session-6s", "", 6 * time.Second, 2 * time.Second},
		{"static", "bench-0", 0, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var total time.Duration
			for range b.N {
				topic, group := restartTopic(b, brokers)
				total += killAndRestart(b, memberConfig{Brokers: brokers, Group: group, Topic: topic,
					InstanceID: tc.instanceID, SessionTimeout: tc.session, HeartbeatPeriod: tc.heartbeat})
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/restart")
		})
	}
}

// TestStaticMembersOfOneSubscriber subscribes twice to one topic in one
// subscriber with Config.GroupInstanceID: the two members of the group
// get instance IDs of their own, the ID and the topic, and a number for
// the second, and the group settles with both, neither fencing the other.
func TestStaticMembersOfOneSubscriber(t *testing.T) {
	brokers := kototest.Brokers(t)
	topic, group := restartTopic(t, brokers)
	sub := kototest.NewSubscriber(t, broker.Config{Brokers: brokers, ConsumerGroup: group, GroupInstanceID: "pod-0"})
	for range 2 {
		kototest.Subscribe(t, sub, topic)
	}
	want := []string{"pod-0." + topic, "pod-0." + topic + ".2"}
	admin := kototest.Admin(t, brokers)
	var got []string
	kototest.WaitFor(t, fmt.Sprintf("group %s stable with members %q", group, want), func() bool {
		described, err := admin.DescribeGroups(kototest.Context(t), group)
		if err != nil {
			t.Fatalf("describe %s: %v", group, err)
		}
		d := described[group]
		got = got[:0]
		for _, m := range d.Members {
			if m.InstanceID != nil {
				got = append(got, *m.InstanceID)
			}
		}
		slices.Sort(got)
		return d.State == "Stable" && slices.Equal(got, want)
	})
}
