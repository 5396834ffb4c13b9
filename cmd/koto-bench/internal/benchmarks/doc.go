// Package benchmarks holds the bodies of koto-bench's measurements; the go
// test benchmarks of this package run the same bodies, so that both
// measure the same thing.
//
// Each body takes a *testing.B and a number of concurrent callers, which
// share b.N operations between them; the result's ns/op is wall time per
// operation, so ops/s = N / T. Every comparison runs both sides in one
// process, on the same machine and the same resources, because only the
// ratio between them means anything on a shared machine.
package benchmarks
