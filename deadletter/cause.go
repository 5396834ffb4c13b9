package deadletter

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// CauseOf returns the ID of the cause of a failure of error class with
// reason (Letter.Cause): the same for every failure of that class whose
// reason reads the same once [MaskReason] masked it.
func CauseOf(class, reason string) string {
	sum := sha256.Sum256([]byte(class + "\x00" + MaskReason(reason)))
	return hex.EncodeToString(sum[:8])
}

// maskers replace the variable parts of an error's text, in order: what
// an earlier one leaves is no longer variable for a later one.
var maskers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`), "<uuid>"},
	{regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?`), "<time>"},
	{regexp.MustCompile(`"(?:[^"\\]|\\.)*"`), `"…"`},
	{regexp.MustCompile("`[^`]*`"), "`…`"},
	{regexp.MustCompile(`(^|[^\pL\pN_])'[^']*'`), `$1'…'`},
	{regexp.MustCompile(`(^|[^\pL\pN_])0[xX][0-9a-fA-F]+`), `$1<n>`},
	{regexp.MustCompile(`(^|[^\pL\pN_])\d+(?:[.:,]\d+)*`), `$1<n>`},
}

// MaskReason returns reason with its variable parts masked: UUIDs, times,
// quoted values and numbers that are not part of a word (the 64 of int64
// stays), so that the failures of one cause read the same
// (Letter.Cause).
func MaskReason(reason string) string {
	for _, m := range maskers {
		reason = m.re.ReplaceAllString(reason, m.with)
	}
	return strings.Join(strings.Fields(reason), " ")
}
