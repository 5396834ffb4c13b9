package console

import (
	"regexp"
	"strings"
)

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

// maskReason returns reason with its variable parts masked: UUIDs, times,
// quoted values and numbers that are not part of a word (the 64 of int64
// stays), so that failures of one cause read the same.
func maskReason(reason string) string {
	for _, m := range maskers {
		reason = m.re.ReplaceAllString(reason, m.with)
	}
	return strings.Join(strings.Fields(reason), " ")
}
