package kafkatest

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/broker/embedded"
)

// Stall is a kfake control of an embedded broker that leaves requests
// unanswered, as a broker that hangs, until released.
type Stall struct {
	// Stalled receives a value as each request is left unanswered (it keeps
	// up to 64).
	Stalled chan struct{}

	mu       sync.Mutex
	n        int
	released bool
}

// StallRequests makes b leave every request of key (Produce, Fetch,
// ListOffsets, CreateTopics…) that names one of the topics unanswered until Release is
// called or t ends. The client waits for the answer until its own read
// timeout (sarama's Net.ReadTimeout, 30 s by default), or until it drops
// the connection; a retry after Release is answered. (kfake's SleepControl
// would answer late instead, but it races and leaks goroutines when several
// requests sleep or the cluster closes meanwhile.)
func StallRequests(t testing.TB, b *embedded.Broker, key kmsg.Key, topics ...string) *Stall {
	t.Helper()
	s := &Stall{Stalled: make(chan struct{}, 64)}
	t.Cleanup(s.Release)
	c := b.Cluster()
	c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.released || !namesTopic(req, topics) {
			return nil, nil, false
		}
		s.n++
		select {
		case s.Stalled <- struct{}{}:
		default:
		}
		return nil, nil, true // handled, with no answer
	})
	return s
}

// Release makes the broker answer the requests that come from now on.
func (s *Stall) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = true
}

// Count returns how many requests were left unanswered.
func (s *Stall) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// namesTopic reports whether a request that carries topic names names one
// of topics.
func namesTopic(req kmsg.Request, topics []string) bool {
	var names []string
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		for _, t := range r.Topics {
			names = append(names, t.Topic)
		}
	case *kmsg.ListOffsetsRequest:
		for _, t := range r.Topics {
			names = append(names, t.Topic)
		}
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			names = append(names, t.Topic)
		}
	case *kmsg.FetchRequest:
		for _, t := range r.Topics {
			names = append(names, t.Topic)
		}
	}
	return slices.ContainsFunc(names, func(n string) bool { return slices.Contains(topics, n) })
}

// Records returns how many records topic holds over all its partitions; 0
// when it does not exist.
func Records(t testing.TB, brokers []string, topic string) int64 {
	t.Helper()
	cl := client(t, brokers)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("kafkatest: end offsets of %s: %v", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return n
}
