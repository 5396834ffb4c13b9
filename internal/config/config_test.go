package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/koto-dev/watermill-koto/internal/config"
)

// backoff and deadLetter stand for the Validate of a configuration that
// another one holds: deadLetter nests backoff, as a package's config nests
// koto.Backoff.
func backoff(initial, multiplier bool) error {
	p := config.For("koto.Backoff")
	if initial {
		p.Add("InitialInterval", "is negative (%v); use 0 for the default", -1)
	}
	if multiplier {
		p.Add("Multiplier", "(%v) is less than 1", 0.5)
	}
	return p.Err()
}

func deadLetter(topic bool, backoffErr error) error {
	p := config.For("middleware.DeadLetterConfig")
	if topic {
		p.Add("Topic", "%q is not a valid topic name", "a b")
	}
	p.Nest("Backoff", backoffErr)
	return p.Err()
}

// TestProblems: every problem recorded is reported, in order, one a line,
// each naming its field by its full path from the outermost
// configuration, in an error that wraps ErrInvalid.
func TestProblems(t *testing.T) {
	const invalid = "invalid configuration: "
	cases := []struct {
		name  string
		build func() error
		want  []string // lines without the "invalid configuration: " prefix; none for no error
	}{
		{"nothing recorded", func() error { return config.For("x.Config").Err() }, nil},
		{"zero value", func() error { var p config.Problems; return p.Err() }, nil},
		{"one field", func() error {
			p := config.For("broker.Config")
			p.Add("Brokers", "is empty; list at least one host:port")
			return p.Err()
		}, []string{"broker.Config.Brokers is empty; list at least one host:port"}},
		{"the whole value", func() error {
			p := config.For("outbox.New")
			p.Add("", "got a nil pool; pass a connected *pgxpool.Pool")
			return p.Err()
		}, []string{"outbox.New got a nil pool; pass a connected *pgxpool.Pool"}},
		{"every field, in order", func() error {
			p := config.For("broker.Config")
			p.Add("Brokers", "is empty")
			p.Add("ConsumerGroup", "is empty")
			p.Add("SASL.User", "is set without a password")
			return p.Err()
		}, []string{"broker.Config.Brokers is empty", "broker.Config.ConsumerGroup is empty", "broker.Config.SASL.User is set without a password"}},
		{"Invalid", func() error {
			return config.Invalid("postgres.NewStore", "", "got a nil pool")
		}, []string{"postgres.NewStore got a nil pool"}},
		{"nested nil", func() error { return deadLetter(false, nil) }, nil},
		{"nested one level", func() error { return deadLetter(false, backoff(true, false)) },
			[]string{"middleware.DeadLetterConfig.Backoff.InitialInterval is negative (-1); use 0 for the default"}},
		{"nested problems joined with the outer ones", func() error { return deadLetter(true, backoff(true, true)) }, []string{
			`middleware.DeadLetterConfig.Topic "a b" is not a valid topic name`,
			"middleware.DeadLetterConfig.Backoff.InitialInterval is negative (-1); use 0 for the default",
			"middleware.DeadLetterConfig.Backoff.Multiplier (0.5) is less than 1",
		}},
		{"nested two levels", func() error {
			p := config.For("middleware.Config")
			p.Add("Publisher", "is nil")
			p.Nest("DeadLetter", deadLetter(true, backoff(false, true)))
			return p.Err()
		}, []string{
			"middleware.Config.Publisher is nil",
			`middleware.Config.DeadLetter.Topic "a b" is not a valid topic name`,
			"middleware.Config.DeadLetter.Backoff.Multiplier (0.5) is less than 1",
		}},
		{"nested at a dotted field", func() error {
			p := config.For("middleware.Config")
			p.Nest("DeadLetter.Backoff", backoff(true, false))
			return p.Err()
		}, []string{"middleware.Config.DeadLetter.Backoff.InitialInterval is negative (-1); use 0 for the default"}},
		{"nested at the whole value", func() error {
			p := config.For("cqrs.Config")
			p.Nest("", backoff(false, true))
			return p.Err()
		}, []string{"cqrs.Config.Multiplier (0.5) is less than 1"}},
		{"nested whole-value problem", func() error {
			p := config.For("outbox.ForwarderConfig")
			p.Nest("Broker", config.Invalid("broker.Config", "", "is missing"))
			return p.Err()
		}, []string{"outbox.ForwarderConfig.Broker is missing"}},
		{"nested nil", func() error {
			p := config.For("x.Config")
			p.Nest("Field", nil)
			return p.Err()
		}, nil},
		{"a cause with %w", func() error {
			p := config.For("broker.Config")
			p.Add("Sarama", "%w", errors.New("Net.DialTimeout must be > 0"))
			return p.Err()
		}, []string{"broker.Config.Sarama Net.DialTimeout must be > 0"}},
	}
	for _, c := range cases {
		err := c.build()
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v, want no error", c.name, err)
			}
			continue
		}
		want := invalid + strings.Join(c.want, "\n"+invalid)
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", c.name, err, want)
		}
		if !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%s: %v does not wrap ErrInvalid", c.name, err)
		}
	}
}

// TestProblemsOneIsNotJoined: a single problem is returned as it is, one
// line; several are joined, and each wraps ErrInvalid.
func TestProblemsOneIsNotJoined(t *testing.T) {
	one := config.Invalid("x.Config", "A", "is bad")
	if strings.Contains(one.Error(), "\n") || !errors.Is(one, config.ErrInvalid) {
		t.Errorf("one problem is not one line wrapping ErrInvalid: %q", one)
	}
	p := config.For("x.Config")
	p.Add("A", "is bad")
	p.Add("B", "is bad")
	many, ok := p.Err().(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("two problems are not joined: %v", p.Err())
	}
	if got := len(many.Unwrap()); got != 2 {
		t.Fatalf("two problems joined into %d errors", got)
	}
	for _, e := range many.Unwrap() {
		if !errors.Is(e, config.ErrInvalid) || strings.Contains(e.Error(), "\n") {
			t.Errorf("joined problem %q is not one line wrapping ErrInvalid", e)
		}
	}
}

// TestProblemsKeepTheCause: a problem recorded with %w wraps its cause as
// well as ErrInvalid, also once nested.
func TestProblemsKeepTheCause(t *testing.T) {
	cause := errors.New(`invalid Kafka topic name "a b"`)
	p := config.For("broker.Config")
	p.Add("", "cannot read topic %q: %w", "a b", cause)
	p.Add("Sarama", "%w", cause)
	outer := config.For("cqrs.Config")
	outer.Nest("Broker", p.Err())
	for name, err := range map[string]error{"Add": config.Invalid("x.Config", "Topic", "%w", cause), "two Adds": p.Err(), "nested": outer.Err()} {
		if !errors.Is(err, cause) || !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%s: %v does not wrap both the cause and ErrInvalid", name, err)
		}
	}
	want := `invalid configuration: cqrs.Config.Broker cannot read topic "a b": invalid Kafka topic name "a b"` + "\n" +
		`invalid configuration: cqrs.Config.Broker.Sarama invalid Kafka topic name "a b"`
	if got := outer.Err().Error(); got != want {
		t.Errorf("nested:\n got %s\nwant %s", got, want)
	}
}
