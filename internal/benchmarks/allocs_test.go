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
