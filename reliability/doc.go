// Package reliability is watermill-koto's reliability suite. It holds no
// library code: its tests kill consumers, cut PostgreSQL, fault and restart
// the broker, force rebalances, push volume and feed hostile input through
// the real stack (embedded Kafka-protocol broker, PostgreSQL, Watermill
// router, this project's middleware and outbox), and check a ledger of
// effects for lost, duplicated and stuck messages.
//
// Run it with
//
//	go test -race -v ./reliability
//
// and it ends with a table: one row per scenario, with what it checks, the
// faults it injected, the messages it sent, and the duplicates and losses
// it found. The scenarios run with fewer messages unless the test binary
// gets -full (go test -race -timeout 30m -v ./reliability -full); none is
// skipped either way.
package reliability
