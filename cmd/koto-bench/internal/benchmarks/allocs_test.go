package benchmarks

import "testing"

// BenchmarkConsumerAllocs reports the allocations and bytes of one
// delivery on each consumer path of AllocsCases (go run ./cmd/koto-bench
// allocs prints them against the handler alone).
func BenchmarkConsumerAllocs(b *testing.B) {
	for _, c := range AllocsCases() {
		b.Run(c.Name, func(b *testing.B) { ConsumerAllocs(b, c) })
	}
}

// TestConsumerAllocsChainCosts checks that the paths are what they say:
// each chain allocates more than the handler alone, idempotency more than
// the chain without it, and parking with nothing parked as much as the
// chain without it, but for its partition's keys.
func TestConsumerAllocsChainCosts(t *testing.T) {
	shortBenchtime(t)
	results, err := CompareAllocs()
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 4 {
		t.Fatalf("%d results", len(results))
	}
	for i := 1; i < 3; i++ {
		if results[i].Allocs <= results[i-1].Allocs || results[i].Bytes <= results[i-1].Bytes {
			t.Errorf("%s allocates %d (%d B), no more than %s: %d (%d B)", results[i].Case.Name, results[i].Allocs,
				results[i].Bytes, results[i-1].Case.Name, results[i-1].Allocs, results[i-1].Bytes)
		}
	}
	// The bytes may differ by the partition's keys, read once and spread
	// over the messages.
	if park, chain := results[3], results[1]; park.Allocs != chain.Allocs || park.Bytes > chain.Bytes+32 {
		t.Errorf("%s allocates %d (%d B), %s %d (%d B): want the same", park.Case.Name, park.Allocs, park.Bytes,
			chain.Case.Name, chain.Allocs, chain.Bytes)
	}
}

// BenchmarkBatchChain reports the cost per message of the batch chain,
// without and with check-handle-mark on a memory store (no Kafka, router
// or database: see BatchChain).
func BenchmarkBatchChain(b *testing.B) {
	b.Run("no idempotency", func(b *testing.B) { BatchChain(b, false) })
	b.Run("check-handle-mark (memory store)", func(b *testing.B) { BatchChain(b, true) })
}

// TestBatchChainHandlesEveryMessage runs BatchChain briefly on both paths
// and checks that the handler got every message once and, with the
// store, that every message was marked.
func TestBatchChainHandlesEveryMessage(t *testing.T) {
	shortBenchtime(t)
	for _, store := range []bool{false, true} {
		r := testing.Benchmark(func(b *testing.B) { BatchChain(b, store) })
		marked, ok := r.Extra["marked/op"]
		if r.N == 0 || r.Extra["handled/op"] != 1 || ok != store || store && marked != 1 {
			t.Fatalf("store %v: N = %d, %v; want every message handled once, and marked once with the store", store, r.N, r.Extra)
		}
	}
}
