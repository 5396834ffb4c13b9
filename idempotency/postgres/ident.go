package postgres

import "github.com/koto-dev/watermill-koto/internal/pgschema"

// quoteIdent returns name as an SQL identifier: bare when PostgreSQL reads
// it the same without quotes, quoted otherwise (see pgschema.QuoteIdent).
func quoteIdent(name string) string { return pgschema.QuoteIdent(name) }
