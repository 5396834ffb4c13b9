package pgschema

import (
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/internal/config"
)

// MaxIdentifier is PostgreSQL's identifier limit, NAMEDATALEN-1 bytes.
// The server silently truncates longer names, so they are refused.
const MaxIdentifier = 63

// QuoteIdent returns name as an SQL identifier. A name that PostgreSQL
// reads the same without quotes (lower-case ASCII letters, digits and
// underscores, not starting with a digit, not a keyword) is written bare,
// as PostgreSQL's own quote_ident does, so that default DDL reads as
// documented. Every other name is quoted by pgx.Identifier.Sanitize, so a
// name can never be read as SQL.
func QuoteIdent(name string) string {
	if plainIdent(name) && !isKeyword(name) {
		return name
	}
	return pgx.Identifier{name}.Sanitize()
}

// CheckName records in p why PostgreSQL would not keep name, the value of
// the configuration field field, as given: empty, longer than limit bytes,
// with a NUL byte or not UTF-8.
func CheckName(p *config.Problems, field, name string, limit int) {
	switch {
	case name == "":
		p.Add(field, "is empty; set a name")
	case len(name) > limit:
		p.Add(field, "%q is %d bytes; shorten it to at most %d bytes", name, len(name), limit)
	case strings.IndexByte(name, 0) >= 0:
		p.Add(field, "%q contains a NUL byte; remove it", name)
	case !utf8.ValidString(name):
		p.Add(field, "%q is not valid UTF-8; use a UTF-8 name", name)
	}
}

// plainIdent reports whether name is made only of what an unquoted
// identifier keeps as is.
func plainIdent(name string) bool {
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
