package pgschema

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/koto-dev/watermill-koto/internal/config"
	"github.com/koto-dev/watermill-koto/kototest/pgtest"
)

func TestQuoteIdent(t *testing.T) {
	for name, want := range map[string]string{
		"koto":                 "koto",
		"processed_messages_2": "processed_messages_2",
		"Koto":                 `"Koto"`,
		"order":                `"order"`,
		"current_user":         `"current_user"`,
		"2fa":                  `"2fa"`,
		"a-b":                  `"a-b"`,
		`x"; DROP TABLE y; --`: `"x""; DROP TABLE y; --"`,
		"é":                    `"é"`,
	} {
		if got := QuoteIdent(name); got != want {
			t.Errorf("QuoteIdent(%q) = %s, want %s", name, got, want)
		}
	}
}

// TestKeywordsCoverServer asks the server for its keywords that cannot be
// bare table names and checks that each is quoted.
func TestKeywordsCoverServer(t *testing.T) {
	pool := pgtest.Pool(t)
	rows, err := pool.Query(context.Background(), "SELECT word FROM pg_get_keywords() WHERE catcode <> 'U'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var word string
		if err := rows.Scan(&word); err != nil {
			t.Fatal(err)
		}
		n++
		if !isKeyword(word) {
			t.Errorf("keyword %q is not quoted", word)
		}
	}
	if err := rows.Err(); err != nil || n == 0 {
		t.Fatalf("read %d keywords: %v", n, err)
	}
}

func TestCheckName(t *testing.T) {
	p := config.For("x.Config")
	CheckName(p, "Table", "outbox", MaxIdentifier)
	if err := p.Err(); err != nil {
		t.Fatalf("CheckName(outbox) = %v", err)
	}
	for name, want := range map[string]string{
		"":                      "invalid configuration: x.Config.Table is empty; set a name",
		strings.Repeat("x", 64): "invalid configuration: x.Config.Table \"" + strings.Repeat("x", 64) + "\" is 64 bytes; shorten it to at most 63 bytes",
		"a\x00b":                `invalid configuration: x.Config.Table "a\x00b" contains a NUL byte; remove it`,
		"\xff":                  `invalid configuration: x.Config.Table "\xff" is not valid UTF-8; use a UTF-8 name`,
	} {
		p := config.For("x.Config")
		CheckName(p, "Table", name, MaxIdentifier)
		err := p.Err()
		if err == nil || err.Error() != want || !errors.Is(err, config.ErrInvalid) {
			t.Errorf("CheckName(%q) = %v, want %q wrapping config.ErrInvalid", name, err, want)
		}
	}
}
