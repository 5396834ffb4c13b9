package kototest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/kototest"
	"github.com/koto-dev/watermill-koto/topics"
)

func TestBrokersStartsAReachableBroker(t *testing.T) {
	t.Setenv(kototest.EnvBrokers, "")
	addrs := kototest.Brokers(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("ping %v: %v", addrs, err)
	}
}

func TestBrokersPrefersEnvironment(t *testing.T) {
	t.Setenv(kototest.EnvBrokers, " k1:9092, ,k2:9093 ")
	got := kototest.Brokers(t)
	if strings.Join(got, ",") != "k1:9092,k2:9093" {
		t.Fatalf("Brokers() = %q, want [k1:9092 k2:9093]", got)
	}
}

func TestNamesAreValidAndUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, prefix := range []string{"orders", t.Name() + "/sub test", "", strings.Repeat("x", 300), "ümlaut"} {
		for _, name := range []string{kototest.Topic(t, prefix), kototest.Group(t, prefix)} {
			if err := topics.Validate(name); err != nil {
				t.Errorf("name for prefix %q: %v", prefix, err)
			}
			if seen[name] {
				t.Errorf("name %q returned twice", name)
			}
			seen[name] = true
		}
	}
	if got := kototest.Topic(t, "orders"); !strings.HasPrefix(got, "orders-") {
		t.Errorf("Topic(t, \"orders\") = %q, want the prefix kept", got)
	}
}

// TestWaitNoLeaksWaitsForGoroutinesThatEnd: a goroutine that ends a second
// after the check starts, longer than goleak's own retries wait, is waited
// for; one that does not end before the timeout is reported.
func TestWaitNoLeaksWaitsForGoroutinesThatEnd(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	ending := make(chan struct{})
	go func() { <-ending }()
	timer := time.AfterFunc(time.Second, func() { close(ending) })
	defer timer.Stop()
	if err := kototest.WaitNoLeaks(kototest.DefaultTimeout, ignore); err != nil {
		t.Errorf("WaitNoLeaks with a goroutine that ends: %v", err)
	}

	stuck := make(chan struct{})
	defer close(stuck)
	go blockUntil(stuck)
	err := kototest.WaitNoLeaks(100*time.Millisecond, ignore)
	if err == nil || !strings.Contains(err.Error(), "blockUntil") {
		t.Errorf("WaitNoLeaks with a goroutine that does not end: %v, want a report that names it", err)
	}
}

func blockUntil(done <-chan struct{}) { <-done }
