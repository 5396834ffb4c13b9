package topics

import (
	"errors"
	"fmt"
)

// MaxLength is the longest topic name Kafka accepts.
const MaxLength = 249

// ErrInvalid is returned, wrapped with the offending name and the reason, for
// a name that Kafka would reject as a topic.
var ErrInvalid = errors.New("invalid Kafka topic name")

// Validate checks a topic name against Kafka's rules: 1 to 249 characters of
// [a-zA-Z0-9._-], and neither "." nor "..". The error wraps ErrInvalid and
// says which rule the name breaks.
func Validate(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("%w: name is empty", ErrInvalid)
	case topic == "." || topic == "..":
		return fmt.Errorf("%w %q: %q is reserved", ErrInvalid, topic, topic)
	case len(topic) > MaxLength:
		return fmt.Errorf("%w %.40q…: %d characters, at most %d allowed", ErrInvalid, topic, len(topic), MaxLength)
	}
	for i := 0; i < len(topic); i++ {
		if !legal(topic[i]) {
			return fmt.Errorf("%w %q: character %q at byte %d; only letters, digits, '.', '_' and '-' are allowed",
				ErrInvalid, topic, topic[i], i)
		}
	}
	return nil
}

func legal(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}
