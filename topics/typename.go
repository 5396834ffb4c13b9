package topics

import (
	"reflect"
	"strings"
	"unicode"
)

// Namer is implemented by a message type that chooses its own type name
// instead of the one TypeName derives from its Go type name.
type Namer interface {
	TypeName() string
}

// TypeName returns the kebab-case type name of a message, as used in topic
// names and message metadata. A value that implements Namer (on the value or
// on its pointer) names itself. Otherwise the Go type name (of a value or a
// pointer to one) is split into words, keeping acronyms and version suffixes
// whole, one trailing "Event" or "Command" is dropped, and the words are
// joined with '-': OrderPlacedEvent{} gives "order-placed" and
// HTTPServerStartedV2 gives "http-server-started-v2". Type arguments of a
// generic type are ignored. A nil pointer is named as a pointer to a zero
// value would be. A nil interface or an unnamed type gives "".
func TypeName(v any) string {
	if v == nil {
		return ""
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		v = reflect.New(rv.Type().Elem()).Interface() // ask a zero value, not nil
	}
	if n, ok := v.(Namer); ok {
		return n.TypeName()
	}
	t := reflect.TypeOf(v)
	if t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(namerType) {
		// Only the pointer has the method: ask a pointer to a copy.
		p := reflect.New(t)
		p.Elem().Set(reflect.ValueOf(v))
		return p.Interface().(Namer).TypeName()
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return kebab(t.Name())
}

var namerType = reflect.TypeFor[Namer]()

// kebab turns a Go identifier into its kebab-case type name.
func kebab(name string) string {
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i]
	}
	words := splitWords(name)
	if n := len(words); n > 1 && (words[n-1] == "event" || words[n-1] == "command") {
		words = words[:n-1]
	}
	return strings.Join(words, "-")
}

// splitWords splits an identifier into lower-case words. A word starts at an
// upper-case letter that follows a lower-case letter or a digit, or that ends
// a run of capitals and is followed by a lower-case letter ("HTTPServer" is
// "http", "server"). Digits stay with the word before them ("V2" is one
// word, and "V<digits>" is a word even after an acronym), and a plural acronym stays whole ("IDs" is "ids"). Anything that is
// neither letter nor digit separates words.
func splitWords(name string) []string {
	rs := []rune(name)
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, string(cur))
			cur = cur[:0]
		}
	}
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if unicode.IsUpper(r) && len(cur) > 0 && startsWord(rs, i) {
			flush()
		}
		cur = append(cur, unicode.ToLower(r))
	}
	flush()
	return words
}

// startsWord reports whether the upper-case rune at rs[i], which follows a
// letter or digit, begins a new word.
func startsWord(rs []rune, i int) bool {
	prev := rs[i-1]
	if unicode.IsLower(prev) || unicode.IsDigit(prev) {
		return true
	}
	if rs[i] == 'V' && i+1 < len(rs) && unicode.IsDigit(rs[i+1]) {
		return true // a version suffix after an acronym: "APIV2" is "api", "v2"
	}
	if i+1 >= len(rs) || !unicode.IsLower(rs[i+1]) {
		return false
	}
	pluralAcronym := rs[i+1] == 's' && (i+2 == len(rs) || !unicode.IsLower(rs[i+2]))
	return !pluralAcronym
}
