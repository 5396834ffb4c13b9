package kototest

import (
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/broker/embedded"
)

// Stall is a fault of an embedded broker: requests of one kind left
// unanswered, as a broker that hangs, until [Stall.Release].
type Stall struct {
	stalled chan struct{}

	mu       sync.Mutex
	n        int
	released bool
}

// StallRequests makes b leave every request of key (kmsg.Produce,
// kmsg.Fetch, kmsg.ListOffsets, kmsg.CreateTopics) that names one of
// topics unanswered until [Stall.Release] or the end of t. The client
// waits for the answer until its own read timeout (sarama's
// Net.ReadTimeout, 30 s by default), or until it drops the connection; a
// retry after Release is answered. [Harness.StallKafka] stalls the
// harness's broker.
func StallRequests(t testing.TB, b *embedded.Broker, key kmsg.Key, topics ...string) *Stall {
	t.Helper()
	// kfake's SleepControl would answer late instead, but it races and
	// leaks goroutines when several requests sleep or the cluster closes
	// meanwhile.
	s := &Stall{stalled: make(chan struct{}, 64)}
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
		case s.stalled <- struct{}{}:
		default:
		}
		return nil, nil, true // handled, with no answer
	})
	return s
}

// Stalled returns a channel that receives a value as each request is left
// unanswered (it keeps up to 64).
func (s *Stall) Stalled() <-chan struct{} { return s.stalled }

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
