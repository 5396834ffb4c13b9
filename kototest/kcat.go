package kototest

import (
	"os"
	"os/exec"
	"testing"
)

// Kcat returns the path of kcat, the command-line client on librdkafka,
// the library under Confluent's .NET, Python and Go clients. Without it
// the test is skipped, or, with CI=true, fails.
func Kcat(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err == nil {
		return path
	}
	const how = "install kcat (on Debian: apt-get install -y kcat)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("kcat not found: %v; %s", err, how)
	}
	t.Skipf("kcat not found: %v; %s (with CI=true this fails)", err, how)
	return ""
}
