package console

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"unicode/utf8"
)

// payloadView is a payload as the dead-letter page shows it: indented
// when it is JSON, as text when it is UTF-8, as a hex dump otherwise.
// The template escapes all of it: nothing in a payload becomes HTML.
type payloadView struct {
	Kind string // "json", "text" or "binary"
	Body string
	Raw  string // as it is, when it is text
	Size int
}

func viewPayload(p []byte) payloadView {
	v := payloadView{Size: len(p)}
	switch {
	case json.Valid(p):
		var b bytes.Buffer
		_ = json.Indent(&b, p, "", "  ")
		v.Kind, v.Body, v.Raw = "json", b.String(), string(p)
	case utf8.Valid(p):
		v.Kind, v.Body = "text", string(p)
	default:
		v.Kind, v.Body = "binary", hex.Dump(p)
	}
	return v
}
