package console

import (
	"cmp"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/internal/config"
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

// Config configures a [Handler]. The zero value of every field but
// Broker's brokers means its default.
type Config struct {
	// Broker connects to Kafka: the same configuration as the services'.
	// ConsumerGroup and InitialOffset in it are not used.
	Broker broker.Config

	// Mapping is the record mapping dead letters are read in
	// (deadletter.Config.Mapping). Default: each record's own, found from
	// its headers; Broker.Marshaler, if set, reads the records of its
	// mapping.
	Mapping broker.Mapping

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

	// ReadOnly removes every action: the pages show, nothing replays or
	// discards.
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
// as their defaults, in one error that wraps koto.ErrInvalidConfig.
// [NewHandler] calls it.
func (c Config) Validate() error {
	c.setDefaults()
	p := config.For("console.Config")
	p.Nest("Broker", c.Broker.Validate())
	p.Nest("Mapping", c.Mapping.Validate())
	if c.SampleInterval < 0 {
		p.Add("SampleInterval", "is negative (%s); use 0 for the default (%s)", c.SampleInterval, DefaultSampleInterval)
	}
	if c.ListLimit < 0 {
		p.Add("ListLimit", "is negative (%d); use 0 for the default (%d)", c.ListLimit, DefaultListLimit)
	}
	for i, g := range c.Groups {
		if strings.TrimSpace(g) == "" {
			p.Add(fmt.Sprintf("Groups[%d]", i), "is empty; name a consumer group, or leave Groups empty to find them")
		}
	}
	validateTokens(p, c.Tokens)
	return p.Err()
}

func validateTokens(p *config.Problems, tokens []Token) {
	names := map[string]bool{}
	for i, t := range tokens {
		field := fmt.Sprintf("Tokens[%d]", i)
		switch {
		case t.Name == "":
			p.Add(field+".Name", "is empty; name it, as replays are logged under it")
		case names[t.Name]:
			p.Add(field+".Name", "%q is used twice; give each token its own name", t.Name)
		}
		names[t.Name] = true
		if len(t.Secret) < minSecret {
			p.Add(field+".Secret", "is %d bytes; use at least %d random ones (openssl rand -hex 16)", len(t.Secret), minSecret)
		}
	}
}

// minSecret is the shortest token secret accepted: a token is all that
// guards a console listening beyond localhost.
const minSecret = 16
