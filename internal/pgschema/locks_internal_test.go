package pgschema

import (
	"strconv"
	"strings"
	"testing"
)

// TestLockKeysSQLUsesClassKey: LockKeysSQL spells ClassKey in decimal,
// which must not drift from the constant.
func TestLockKeysSQLUsesClassKey(t *testing.T) {
	if want := "pg_advisory_xact_lock(" + strconv.Itoa(int(ClassKey)) + ", h)"; !strings.Contains(LockKeysSQL, want) {
		t.Fatalf("LockKeysSQL does not take %s:\n%s", want, LockKeysSQL)
	}
}
