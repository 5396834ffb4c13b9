package topics

import (
	"regexp"
	"testing"
	"unicode/utf8"
)

var kebabShape = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

var validShape = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func FuzzKebab(f *testing.F) {
	for _, s := range []string{"OrderPlacedEvent", "HTTPServerStartedV2", "UserIDs", "a_B__c", "Event", "", "ÀÉ", "X9y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got := kebab(name)
		if got == "" || !isASCII(name) {
			return
		}
		if !kebabShape.MatchString(got) {
			t.Fatalf("kebab(%q) = %q, not kebab-case", name, got)
		}
		if kebab(got) != got && !endsWithDroppedSuffix(got) {
			t.Fatalf("kebab is not stable: kebab(%q) = %q, kebab(%q) = %q", name, got, got, kebab(got))
		}
	})
}

func endsWithDroppedSuffix(s string) bool {
	words := splitWords(s)
	last := words[len(words)-1]
	return len(words) > 1 && (last == "event" || last == "command")
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func FuzzValidate(f *testing.F) {
	for _, s := range []string{"orders.order-placed", "", ".", "..", "bad topic!", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, topic string) {
		err := Validate(topic)
		ok := topic != "." && topic != ".." && validShape.MatchString(topic)
		if (err == nil) != ok {
			t.Fatalf("Validate(%q) = %v, want valid=%v", topic, err, ok)
		}
	})
}
