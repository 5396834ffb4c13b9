package parking

import (
	"github.com/koto-dev/watermill-koto/internal/config"
	"github.com/koto-dev/watermill-koto/internal/pgschema"
)

// Defaults of Config. A zero field means its default.
const (
	defaultSchema = "koto"
	defaultTable  = "parked"
)

// queueSuffix names the table's queue index: <Table>_queue.
const queueSuffix = "_queue"

// maxTable leaves room for the index name within PostgreSQL's identifier
// limit.
const maxTable = pgschema.MaxIdentifier - len(queueSuffix)

// Config configures a Store. Its zero value is the default: table
// koto.parked, created by Setup.
type Config struct {
	// Schema holds the table; default "koto". Names are used exactly as
	// given, case included: they are quoted, never interpolated raw.
	Schema string
	// Table is the table's name; default "parked". At most 57 bytes, so
	// that its index <Table>_queue fits PostgreSQL's 63-byte limit.
	Table string
	// DisableAutoCreateSchema, when true, makes Setup check that the table
	// exists instead of creating it; use it when migrations create it
	// (see SchemaSQL).
	DisableAutoCreateSchema bool
}

func (c *Config) setDefaults() {
	if c.Schema == "" {
		c.Schema = defaultSchema
	}
	if c.Table == "" {
		c.Table = defaultTable
	}
}

// Validate reports every field that cannot work, in one error that wraps
// koto.ErrInvalidConfig. Zero fields count as their defaults, so Config{}
// is valid. NewStore calls it.
func (c Config) Validate() error {
	c.setDefaults()
	p := config.For("parking.Config")
	pgschema.CheckName(p, "Schema", c.Schema, pgschema.MaxIdentifier)
	pgschema.CheckName(p, "Table", c.Table, maxTable)
	return p.Err()
}
