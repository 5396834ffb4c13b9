package outbox

import (
	"github.com/koto-dev/watermill-koto/internal/config"

	"github.com/koto-dev/watermill-koto/internal/pgschema"
	"github.com/koto-dev/watermill-koto/internal/scheduleid"
)

// Defaults of Config. A zero field means its default.
const (
	defaultSchema = "koto"
	defaultTable  = "outbox"
	// defaultMaxMessageBytes is sarama's default Producer.MaxMessageBytes,
	// just under Kafka's default message.max.bytes.
	defaultMaxMessageBytes = 1_000_000
)

// offsetsSuffix names the table beside the outbox table that holds the
// forwarder's position (<Table>_offsets); the schedule's are
// scheduleid's.
const offsetsSuffix = "_offsets"

// maxTable leaves room for the longest suffix within PostgreSQL's
// identifier limit.
const maxTable = pgschema.MaxIdentifier - len(scheduleid.ScheduledSuffix)

// Config configures an Outbox. Its zero value is the default: tables
// koto.outbox and koto.outbox_offsets, created by Setup.
type Config struct {
	// Schema holds the tables; default "koto". Names are used
	// exactly as given, case included: they are quoted, never
	// interpolated raw.
	Schema string
	// Table is the outbox table's name; default "outbox". The forwarder
	// keeps its position in <Table>_offsets and the schedule is in
	// <Table>_scheduled and <Table>_settled, so Table has at most 53
	// bytes.
	Table string
	// DisableAutoCreateSchema, when true, makes Setup (and so the
	// forwarder) check that the tables exist instead of creating them;
	// use it when migrations create them (see SchemaSQL).
	DisableAutoCreateSchema bool
	// MaxMessageBytes is the largest message a publisher accepts, counting
	// payload, metadata, UUID and partition key; default
	// 1 000 000. Keep it at most the producer's
	// Producer.MaxMessageBytes and the topics' max.message.bytes: a row
	// Kafka refuses would stop the forwarder until Kafka's limit is raised.
	MaxMessageBytes int
}

// setDefaults fills the zero fields with their defaults.
func (c *Config) setDefaults() {
	if c.Schema == "" {
		c.Schema = defaultSchema
	}
	if c.Table == "" {
		c.Table = defaultTable
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = defaultMaxMessageBytes
	}
}

// Validate reports every field that cannot work, in one error that wraps
// koto.ErrInvalidConfig. Zero fields count as their defaults, so Config{}
// is valid. New calls it.
func (c Config) Validate() error {
	c.setDefaults()
	p := config.For("outbox.Config")
	pgschema.CheckName(p, "Schema", c.Schema, pgschema.MaxIdentifier)
	pgschema.CheckName(p, "Table", c.Table, maxTable)
	if c.MaxMessageBytes < 0 {
		p.Add("MaxMessageBytes", "is %d; set a positive size in bytes, or 0 for %d", c.MaxMessageBytes, defaultMaxMessageBytes)
	}
	return p.Err()
}
