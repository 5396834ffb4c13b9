package console

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/broker"
)

// Defaults applied to the zero values of [Config].
const (
	// DefaultSampleInterval is how often the console samples lag, dead
	// letters and outbox backlog for its charts.
	DefaultSampleInterval = 15 * time.Second
	// DefaultListLimit is how many dead letters of a group the grouped
	// view and the list read at most.
	DefaultListLimit = 10_000
)

// ErrInvalidConfig is wrapped by every error that rejects a [Config]; the
// error's text names the field and says what to change.
var ErrInvalidConfig = errors.New("console: invalid configuration")

// Config configures a [Handler]. The zero value of every field but
// Broker's brokers means its default.
type Config struct {
	// Broker connects to Kafka: the same configuration as the services'.
	// ConsumerGroup and InitialOffset in it are not used.
	Broker broker.Config

	// Groups are the consumer groups to show. Empty: every group of the
	// cluster and every group with a dead-letter topic (see the package
	// documentation).
	Groups []string

	// Pool is the database whose outbox tables the overview shows; nil
	// shows none.
	Pool *pgxpool.Pool
	// OutboxSchemas are the schemas searched for outbox tables. Default:
	// outbox.DefaultSchema.
	OutboxSchemas []string

	// ReadOnly removes every action: the pages show, nothing replays.
	ReadOnly bool
	// Tokens, when set, are required on every request (see Security in
	// the package documentation); their names say who replayed what.
	Tokens []Token
	// Metrics serves /metrics, in Prometheus's text format.
	Metrics bool

	// SampleInterval is how often the charts are sampled. Default:
	// [DefaultSampleInterval].
	SampleInterval time.Duration
	// ListLimit bounds the dead letters of a group read for one page.
	// Default: [DefaultListLimit].
	ListLimit int

	// Logger receives a line for each replay started and finished, and
	// sampling errors. Default: slog.Default().
	Logger *slog.Logger
}

// Token is a secret that opens the console, and the name it is logged
// under.
type Token struct {
	Name, Secret string
}

func (c *Config) setDefaults() {
	if len(c.OutboxSchemas) == 0 {
		c.OutboxSchemas = []string{defaultOutboxSchema}
	}
	c.SampleInterval = cmp.Or(c.SampleInterval, DefaultSampleInterval)
	c.ListLimit = cmp.Or(c.ListLimit, DefaultListLimit)
	c.Logger = cmp.Or(c.Logger, slog.Default())
}

// Validate reports every field that cannot be used, zero values counting
// as their defaults, joined, each wrapping [ErrInvalidConfig].
// [NewHandler] calls it.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if err := c.Broker.Validate(); err != nil {
		errs = append(errs, invalid("Config.Broker: %w", err))
	}
	if c.SampleInterval < 0 {
		errs = append(errs, invalid("Config.SampleInterval is negative (%s); use 0 for the default (%s)", c.SampleInterval, DefaultSampleInterval))
	}
	if c.ListLimit < 0 {
		errs = append(errs, invalid("Config.ListLimit is negative (%d); use 0 for the default (%d)", c.ListLimit, DefaultListLimit))
	}
	for i, g := range c.Groups {
		if strings.TrimSpace(g) == "" {
			errs = append(errs, invalid("Config.Groups[%d] is empty; name a consumer group, or leave Groups empty to find them", i))
		}
	}
	errs = append(errs, validateTokens(c.Tokens)...)
	return errors.Join(errs...)
}

func validateTokens(tokens []Token) []error {
	var errs []error
	names := map[string]bool{}
	for i, t := range tokens {
		switch {
		case t.Name == "":
			errs = append(errs, invalid("Config.Tokens[%d].Name is empty; name it, as replays are logged under it", i))
		case names[t.Name]:
			errs = append(errs, invalid("Config.Tokens[%d].Name %q is used twice; give each token its own name", i, t.Name))
		}
		names[t.Name] = true
		if len(t.Secret) < minSecret {
			errs = append(errs, invalid("Config.Tokens[%d].Secret is %d bytes; use at least %d random ones (openssl rand -hex 16)", i, len(t.Secret), minSecret))
		}
	}
	return errs
}

// minSecret is the shortest token secret accepted: a token is all that
// guards a console listening beyond localhost.
const minSecret = 16

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}
