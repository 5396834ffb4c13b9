package embedded_test

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestClusterInjectsFaults fails every produce to one topic through the
// cluster of Broker.Cluster until the fault is removed.
func TestClusterInjectsFaults(t *testing.T) {
	b := kototest.Embedded(t, embedded.WithTopics("faulty"))
	ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
	defer cancel()
	cl := newKgoClient(t, b.Addrs(), kgo.RecordRetries(0))
	fault := b.Cluster().Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Produce}, Topic: "faulty", Count: -1, Err: kerr.TopicAuthorizationFailed,
	})
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "faulty", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce under the fault: %v, want the injected TOPIC_AUTHORIZATION_FAILED", err)
	}
	if fault.Hits() == 0 {
		t.Fatal("the fault counts no hit")
	}
	fault.Remove()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "faulty", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce after the fault was removed: %v", err)
	}
}

// TestRestartOnSameAddressAndData closes the broker, checks that it is
// down, restarts it and finds the same address, records and a new cluster.
func TestRestartOnSameAddressAndData(t *testing.T) {
	b := kototest.Embedded(t, embedded.WithDataDir(t.TempDir()), embedded.WithTopics("kept"))
	addrs := b.Addrs()
	produceValues(t, addrs, "kept", values("before", 5)...)
	before := b.Cluster()
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if b.Cluster() != nil {
		t.Fatal("Cluster() of a closed broker is not nil")
	}
	ctx, cancel := context.WithTimeout(context.Background(), kototest.DefaultTimeout)
	defer cancel()
	down := newKgoClient(t, addrs, kgo.RequestRetries(0))
	pingCtx, cancelPing := context.WithTimeout(ctx, kototest.DefaultTimeout/10)
	defer cancelPing()
	if err := down.Ping(pingCtx); err == nil {
		t.Fatal("ping succeeded while the broker is closed")
	}

	if err := b.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if got := b.Addrs(); got[0] != addrs[0] {
		t.Fatalf("Addrs() after Restart = %v, want %v", got, addrs)
	}
	if c := b.Cluster(); c == nil || c == before {
		t.Fatal("Cluster() after Restart is not a new cluster")
	}
	assertRecordCount(t, addrs, "kept", 5)
}
