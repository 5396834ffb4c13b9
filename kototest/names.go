package kototest

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
)

// maxPrefix keeps generated names well inside Kafka's 249-character limit
// for topics, and inside what the dead-letter and reply suffixes add.
const maxPrefix = 100

// Topic returns a new topic name, unique to this call, that starts with
// prefix: "<prefix>-<16 hex digits>". Characters Kafka does not allow in
// topic names ([a-zA-Z0-9._-] only) are replaced by '-', so t.Name() is a
// fine prefix. The topic is not created.
func Topic(t testing.TB, prefix string) string {
	t.Helper()
	return uniqueName(t, prefix, "topic")
}

// Group returns a new consumer group ID, unique to this call, built like
// [Topic].
func Group(t testing.TB, prefix string) string {
	t.Helper()
	return uniqueName(t, prefix, "group")
}

// ServiceName returns base on a broker of the test's own, and base with a
// random suffix on a shared cluster (KAFKA_BROKERS), so that the topics
// named after a service never collide across runs there.
func ServiceName(t testing.TB, base string) string {
	t.Helper()
	if len(FromEnv()) == 0 {
		return base
	}
	return strings.ReplaceAll(Topic(t, base), ".", "-")
}

func uniqueName(t testing.TB, prefix, fallback string) string {
	t.Helper()
	var suffix [8]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		t.Fatalf("kototest: random name: %v", err)
	}
	p := sanitize(prefix)
	if p == "" {
		p = fallback
	}
	return p + "-" + hex.EncodeToString(suffix[:])
}

// sanitize maps prefix onto Kafka's topic alphabet and caps its length.
func sanitize(prefix string) string {
	s := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, prefix)
	if len(s) > maxPrefix {
		s = s[:maxPrefix]
	}
	return s
}
