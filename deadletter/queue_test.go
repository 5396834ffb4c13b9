package deadletter_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	koto "github.com/koto-dev/watermill-koto"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/deadletter"
	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

// TestShow returns one dead letter whole, to concurrent callers too, and
// ErrNotFound where there is none.
func TestShow(t *testing.T) {
	e := newEnv(t)
	c := &consumer{bug: errBug}
	e.run(t, c, e.group)
	e.publish(t, "order-placed", `{"order":"o-1","amount":-5}`)
	q := e.queue(t, deadletter.Config{})
	l := waitForDeadLetters(t, q, 1)[0]

	ctx := kototest.Context(t)
	got, err := q.Show(ctx, l.Partition, l.Offset)
	if err != nil {
		t.Fatalf("Show(%d, %d): %v", l.Partition, l.Offset, err)
	}
	if string(got.Payload) != `{"order":"o-1","amount":-5}` || got.UUID != l.UUID || got.Reason != l.Reason ||
		got.Metadata.Get("dead_letter_failed_at") == "" {
		t.Fatalf("Show = %+v, want the listed dead letter with its payload", got)
	}
	errs := make(chan error, 4)
	for range cap(errs) { // one queue, several callers
		go func() {
			_, err := q.List(ctx, deadletter.Filter{})
			if err == nil {
				_, err = q.Show(ctx, l.Partition, l.Offset)
			}
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Errorf("concurrent List and Show: %v", err)
		}
	}
	for _, pos := range [][2]int64{{int64(l.Partition), l.Offset + 1}, {99, 0}, {int64(l.Partition), -3}} {
		if _, err := q.Show(ctx, int32(pos[0]), pos[1]); !errors.Is(err, deadletter.ErrNotFound) {
			t.Errorf("Show(%d, %d): %v, want ErrNotFound", pos[0], pos[1], err)
		}
	}
}

// TestForeignRecordIsListedNotReplayed: a record without the middleware's
// metadata (another producer's, without headers) is listed with empty
// fields, and a replay leaves it where it is.
func TestForeignRecordIsListedNotReplayed(t *testing.T) {
	e := newEnv(t)
	producer, err := broker.NewProducer(e.brokerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: e.dlq, Value: sarama.StringEncoder("not json")}); err != nil {
		t.Fatalf("produce: %v", err)
	}
	q := e.queue(t, deadletter.Config{})
	l := waitForDeadLetters(t, q, 1)[0]
	if l.UUID != "" || l.OriginalTopic != "" || l.OriginalPartition != -1 || l.OriginalOffset != -1 || !l.FailedAt.IsZero() || string(l.Payload) != "not json" {
		t.Fatalf("foreign record listed as %+v", l)
	}
	if got, err := q.List(kototest.Context(t), deadletter.Filter{Since: time.Now().Add(-time.Hour)}); err != nil || len(got) != 1 {
		t.Fatalf("a time filter over a record without failed_at uses its timestamp: %d listed, %v", len(got), err)
	}
	var unroutable []*deadletter.Letter
	res, err := q.Replay(kototest.Context(t), deadletter.Filter{}, deadletter.ReplayOptions{Progress: func(p deadletter.ReplayProgress) {
		unroutable = append(unroutable, p.Unroutable...)
	}})
	if err != nil || res.Sent != 0 || res.Unroutable != 1 || len(unroutable) != 1 {
		t.Fatalf("Replay = %+v, %v (reported %d unroutable); want it unroutable", res, err, len(unroutable))
	}
}

// TestDroppedLetterIsListedNotReplayed: a dead letter that the middleware
// sent without its payload, because the whole one was too large, shows why
// in Letter.Dropped, and a replay leaves it where it is rather than send
// an empty payload to its original topic.
func TestDroppedLetterIsListedNotReplayed(t *testing.T) {
	e := newEnv(t)
	producer, err := broker.NewProducer(e.brokerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	const why = "payload (70000 bytes) and 3 metadata entries left out: the dead letter was too large"
	if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: e.dlq, Headers: []sarama.RecordHeader{
		{Key: []byte("dead_letter_original_topic"), Value: []byte(e.topic)},
		{Key: []byte("dead_letter_reason"), Value: []byte("decoding: bad")},
		{Key: []byte("dead_letter_dropped"), Value: []byte(why)},
	}}); err != nil {
		t.Fatalf("produce: %v", err)
	}
	q := e.queue(t, deadletter.Config{})
	if l := waitForDeadLetters(t, q, 1)[0]; l.Dropped != why || l.OriginalTopic != e.topic {
		t.Fatalf("dropped letter listed as %+v", l)
	}
	res, err := q.Replay(kototest.Context(t), deadletter.Filter{}, deadletter.ReplayOptions{})
	if err != nil || res.Sent != 0 || res.Unroutable != 1 {
		t.Fatalf("Replay = %+v, %v; want it unroutable, not sent", res, err)
	}
	if n := kototest.Records(t, e.brokers, e.topic); n != 0 {
		t.Fatalf("%d records reached the original topic", n)
	}
}

// TestUnrecordedBatchIsSentAgainAndSkippedByTheConsumer opens the one
// window of the replay: Kafka wrote the batch but the commit in the replay
// group failed. The error says so, the next replay sends the batch again,
// and the consumer's idempotency skips the second copies: the fixed
// handler runs once per dead letter.
func TestUnrecordedBatchIsSentAgainAndSkippedByTheConsumer(t *testing.T) {
	b := kototest.Embedded(t)
	e := newEnvOn(t, b.Addrs())
	c := &consumer{bug: errBug}
	e.run(t, c, e.group)
	uuids := e.publish(t, "order-placed", "a", "b", "c")
	q := e.queue(t, deadletter.Config{})
	waitForDeadLetters(t, q, 3)
	c.setBug(nil)

	fault := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: q.ReplayGroup(), Err: kerr.GroupAuthorizationFailed})
	ctx := kototest.Context(t)
	res, err := q.Replay(ctx, deadletter.Filter{}, deadletter.ReplayOptions{})
	if err == nil || !strings.Contains(err.Error(), "could not be recorded") || fault.Hits() != 1 {
		t.Fatalf("Replay with the commit failing = %+v, %v (%d commits failed); want an error saying the batch is unrecorded", res, err, fault.Hits())
	}
	kototest.WaitFor(t, "the first copies handled", func() bool {
		handled, _ := c.snapshot()
		return len(handled) >= 3
	})

	res, err = q.Replay(ctx, deadletter.Filter{}, deadletter.ReplayOptions{})
	if err != nil || res.Sent != 3 {
		t.Fatalf("Replay after the failed commit = %+v, %v; want the unrecorded batch sent again", res, err)
	}
	kototest.WaitFor(t, "the second copies skipped", func() bool {
		_, duplicates := c.snapshot()
		return len(duplicates) >= 3
	})
	handled, duplicates := c.snapshot()
	if !slices.Equal(sorted(handled), sorted(uuids)) || !slices.Equal(sorted(duplicates), sorted(uuids)) {
		t.Fatalf("handled %v, skipped as duplicates %v; want each of %v handled once and skipped once", handled, duplicates, uuids)
	}
	if res, err := q.Replay(ctx, deadletter.Filter{}, deadletter.ReplayOptions{}); err != nil || res.Sent != 0 {
		t.Fatalf("third Replay = %+v, %v; want nothing", res, err)
	}
}

// TestOnlyOwnReplays: a replay for the group that failed reaches every
// group of the topic; a handler with OnlyOwnReplays acks it without
// handling, one without it relies on its idempotency store.
func TestOnlyOwnReplays(t *testing.T) {
	e := newEnv(t)
	failing := &consumer{bug: errBug}
	e.run(t, failing, e.group)
	guarded, plain := &consumer{}, &consumer{}
	guardedGroup := kototest.Group(t, "shipping")
	e.run(t, guarded, guardedGroup, deadletter.OnlyOwnReplays(nil))
	e.run(t, plain, kototest.Group(t, "billing"))
	uuid := e.publish(t, "order-placed", "x")[0]
	q := e.queue(t, deadletter.Config{})
	waitForDeadLetters(t, q, 1)
	kototest.WaitFor(t, "the other groups to handle the original", func() bool {
		g, _ := guarded.snapshot()
		p, _ := plain.snapshot()
		return len(g) == 1 && len(p) == 1
	})

	failing.setBug(nil)
	var copyAt deadletter.Replayed
	res, err := q.Replay(kototest.Context(t), deadletter.Filter{}, deadletter.ReplayOptions{Progress: func(p deadletter.ReplayProgress) {
		for _, r := range p.Sent {
			copyAt = r
		}
	}})
	if err != nil || res.Sent != 1 {
		t.Fatalf("Replay = %+v, %v", res, err)
	}
	kototest.WaitFor(t, "the replay handled by the failed group and skipped by the plain one", func() bool {
		h, _ := failing.snapshot()
		_, d := plain.snapshot()
		return len(h) == 1 && len(d) == 1
	})
	kototest.WaitFor(t, "the guarded group to commit past the replayed copy", func() bool {
		return e.committed(t, guardedGroup, copyAt.ToPartition) > copyAt.ToOffset
	})
	if h, d := guarded.snapshot(); len(h) != 1 || len(d) != 0 || h[0] != uuid {
		t.Fatalf("guarded group handled %v, skipped as duplicates %v; want only the original, the replay acked before idempotency", h, d)
	}
}

// TestQueueOverSASLAndTLS lists and replays through a broker that takes
// only TLS connections authenticated with SCRAM: the services' broker
// configuration is all the queue needs.
func TestQueueOverSASLAndTLS(t *testing.T) {
	_, cfg := kototest.SecureBroker(t, sarama.SASLTypeSCRAMSHA256)
	group := kototest.Group(t, "secure")
	q, err := deadletter.NewQueue(deadletter.Config{Broker: cfg, ConsumerGroup: group})
	if err != nil {
		t.Fatalf("NewQueue: %v", err)
	}
	ctx := kototest.Context(t)
	if err := broker.ProvisionTopics(ctx, cfg, q.Topic()); err != nil {
		t.Fatal(err)
	}
	if got, err := q.List(ctx, deadletter.Filter{}); err != nil || len(got) != 0 {
		t.Fatalf("List of an empty topic: %v, %v", got, err)
	}
	if res, err := q.Replay(ctx, deadletter.Filter{}, deadletter.ReplayOptions{}); err != nil || res.Sent != 0 {
		t.Fatalf("Replay of an empty topic: %+v, %v", res, err)
	}
	for i := range 2 {
		if err := q.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}

	bad := cfg
	bad.SASL.Password += "-wrong"
	if _, err := deadletter.NewQueue(deadletter.Config{Broker: bad, ConsumerGroup: group}); !errors.Is(err, broker.ErrAuthenticationFailed) {
		t.Fatalf("NewQueue with a wrong password: %v, want ErrAuthenticationFailed", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := deadletter.Config{Broker: broker.Config{Brokers: []string{"127.0.0.1:9092"}}, ConsumerGroup: "payments.order-placed-consumer"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for name, c := range map[string]struct {
		cfg   deadletter.Config
		field string
	}{
		"no group":                     {deadletter.Config{Broker: ok.Broker}, "ConsumerGroup"},
		"bad topic":                    {deadletter.Config{Broker: ok.Broker, ConsumerGroup: "g", Topic: "bad topic"}, "Topic"},
		"negative batch":               {deadletter.Config{Broker: ok.Broker, ConsumerGroup: "g", BatchSize: -1}, "BatchSize"},
		"replay in the consumer group": {deadletter.Config{Broker: ok.Broker, ConsumerGroup: "g", ReplayGroup: "g"}, "ReplayGroup"},
		"no brokers":                   {deadletter.Config{ConsumerGroup: "g"}, "Broker.Brokers"},
	} {
		prefix := "invalid configuration: deadletter.Config." + c.field + " "
		err := c.cfg.Validate()
		if !errors.Is(err, koto.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), prefix) {
			t.Errorf("%s: %v, want ErrInvalidConfig naming %s", name, err, c.field)
		}
		if _, nerr := deadletter.NewQueue(c.cfg); !errors.Is(nerr, koto.ErrInvalidConfig) || !strings.HasPrefix(nerr.Error(), prefix) {
			t.Errorf("%s: NewQueue: %v, want ErrInvalidConfig naming %s", name, nerr, c.field)
		}
	}
	err := deadletter.Config{Topic: "bad topic", BatchSize: -1}.Validate()
	want := strings.Join([]string{
		`invalid configuration: deadletter.Config.ConsumerGroup is empty; set it to the group whose dead letters to read, e.g. topics.ConsumerGroup("payments", "order-placed")`,
		`invalid configuration: deadletter.Config.Topic invalid Kafka topic name "bad topic": character ' ' at byte 3; only letters, digits, '.', '_' and '-' are allowed; or leave it empty for topics.DeadLetter(ConsumerGroup)`,
		"invalid configuration: deadletter.Config.BatchSize is negative (-1); use 0 for the default (100) or a positive count",
		`invalid configuration: deadletter.Config.Broker.Brokers is empty; list at least one host:port, e.g. []string{"127.0.0.1:9092"}`,
	}, "\n")
	if err == nil || err.Error() != want || !errors.Is(err, topics.ErrInvalid) {
		t.Errorf("every problem:\n got %v\nwant %s\nwrapping topics.ErrInvalid", err, want)
	}
}

func TestFilter(t *testing.T) {
	now := time.Now()
	l := &deadletter.Letter{UUID: "u1", TypeName: "order-placed", ErrorClass: "poison", Reason: "order 7: Amount is NEGATIVE", FailedAt: now,
		CorrelationID: "c1", Partition: 2, Offset: 40, Cause: deadletter.CauseOf("poison", "order 7: Amount is NEGATIVE")}
	for _, tc := range []struct {
		f    deadletter.Filter
		want bool
	}{
		{deadletter.Filter{}, true},
		{deadletter.Filter{Reason: "negative", ErrorClass: "POISON", TypeName: "order-placed", UUIDs: []string{"u0", "u1"}}, true},
		{deadletter.Filter{Since: now, Until: now.Add(time.Second)}, true},
		{deadletter.Filter{Since: now.Add(time.Nanosecond)}, false},
		{deadletter.Filter{Until: now}, false},
		{deadletter.Filter{Reason: "positive"}, false},
		{deadletter.Filter{ErrorClass: "retryable"}, false},
		{deadletter.Filter{TypeName: "order"}, false},
		{deadletter.Filter{UUIDs: []string{"u2"}}, false},
		{deadletter.Filter{Cause: deadletter.CauseOf("poison", "order 8: Amount is NEGATIVE"), CorrelationID: "c1"}, true},
		{deadletter.Filter{Cause: deadletter.CauseOf("retryable", "order 7: Amount is NEGATIVE")}, false},
		{deadletter.Filter{Cause: deadletter.CauseOf("poison", "order 7: Amount is positive")}, false},
		{deadletter.Filter{CorrelationID: "c2"}, false},
		{deadletter.Filter{Positions: []deadletter.Position{{Partition: 0, Offset: 40}, {Partition: 2, Offset: 40}}}, true},
		{deadletter.Filter{Positions: []deadletter.Position{{Partition: 2, Offset: 41}}}, false},
	} {
		if got := tc.f.Match(l); got != tc.want {
			t.Errorf("%+v.Match = %v, want %v", tc.f, got, tc.want)
		}
	}
	for _, f := range []deadletter.Filter{{Limit: -1}, {Since: now, Until: now}} {
		if err := f.Validate(); !errors.Is(err, koto.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "invalid configuration: deadletter.Filter.") {
			t.Errorf("%+v.Validate() = %v, want ErrInvalidConfig naming the field", f, err)
		}
		if _, err := (&deadletter.Queue{}).List(context.Background(), f); !errors.Is(err, koto.ErrInvalidConfig) {
			t.Errorf("List(%+v) = %v, want ErrInvalidConfig", f, err)
		}
		if _, err := (&deadletter.Queue{}).Replay(context.Background(), f, deadletter.ReplayOptions{}); !errors.Is(err, koto.ErrInvalidConfig) {
			t.Errorf("Replay(%+v) = %v, want ErrInvalidConfig", f, err)
		}
	}
	both := deadletter.Filter{Limit: -1, Since: now, Until: now}.Validate()
	if both == nil || strings.Count(both.Error(), "invalid configuration: deadletter.Filter.") != 2 ||
		!strings.Contains(both.Error(), "Filter.Limit is negative (-1)") || !strings.Contains(both.Error(), "Filter.Since (") {
		t.Errorf("a Filter with two problems: %v, want both", both)
	}
}

// TestReplayGroupInUse: a replay refuses to start while something consumes
// in its replay group, and sends nothing.
func TestReplayGroupInUse(t *testing.T) {
	e := newEnv(t)
	c := &consumer{bug: errBug}
	e.run(t, c, e.group)
	e.publish(t, "order-placed", "a")
	q := e.queue(t, deadletter.Config{})
	waitForDeadLetters(t, q, 1)

	other := kototest.Topic(t, "other")
	if err := broker.ProvisionTopics(kototest.Context(t), e.brokerConfig(), other); err != nil {
		t.Fatal(err)
	}
	member, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumerGroup(q.ReplayGroup()), kgo.ConsumeTopics(other))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(kototest.Context(t))
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for ctx.Err() == nil {
			member.PollFetches(ctx)
		}
	}()
	defer func() {
		cancel()
		<-polled
		member.Close()
	}()

	adm, err := sarama.NewClusterAdmin(e.brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	kototest.WaitFor(t, "the member to join the replay group", func() bool {
		groups, err := adm.DescribeConsumerGroups([]string{q.ReplayGroup()})
		return err == nil && len(groups) == 1 && len(groups[0].Members) > 0
	})
	_, replayErr := q.Replay(kototest.Context(t), deadletter.Filter{}, deadletter.ReplayOptions{})
	if !errors.Is(replayErr, deadletter.ErrReplayGroupInUse) {
		t.Fatalf("Replay with a member in the replay group: %v, want ErrReplayGroupInUse", replayErr)
	}
	if got := e.replayedUUIDs(t); len(got) != 0 {
		t.Fatalf("a refused replay sent %v", got)
	}
}

func TestParsePosition(t *testing.T) {
	if p, err := deadletter.ParsePosition("3/42"); err != nil || p != (deadletter.Position{Partition: 3, Offset: 42}) || p.String() != "3/42" {
		t.Errorf("ParsePosition(3/42) = %v, %v", p, err)
	}
	for _, bad := range []string{"", "3", "3/", "/42", "a/1", "-1/2", "3/42/1", "2147483648/0", "0/99999999999999999999"} {
		if p, err := deadletter.ParsePosition(bad); err == nil {
			t.Errorf("ParsePosition(%q) = %v, want an error", bad, p)
		}
	}
}
