package postgres

import (
	"log/slog"
	"time"

	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/internal/config"
	"github.com/koto-dev/watermill-koto/internal/pgschema"
)

// Defaults of Config. A zero field means its default.
const (
	defaultSchema           = "koto"
	defaultTable            = "processed_messages"
	defaultCleanupInterval  = time.Hour
	defaultCleanupBatchSize = 5000
)

// maxTable leaves room for the index name ix_<table>_processed_at within
// PostgreSQL's identifier limit (longer names are silently truncated by the
// server, so they are refused).
const maxTable = pgschema.MaxIdentifier - len("ix__processed_at")

// Config configures a Store. Its zero value is the default configuration:
// table koto.processed_messages, created on first use, cleaned every hour,
// marks counting for idempotency.DefaultWindow.
type Config struct {
	// Schema holds the table; default "koto". Names are used
	// exactly as given, case included: they are quoted, never interpolated
	// raw.
	Schema string
	// Table is the table's name; default "processed_messages". At most 47 bytes,
	// so that its index name ix_<table>_processed_at fits PostgreSQL's
	// 63-byte limit.
	Table string
	// DisableAutoCreateSchema, when true, makes the store check on first
	// use that the table exists instead of creating it; use it when
	// migrations create the table (see SchemaSQL).
	DisableAutoCreateSchema bool
	// CleanupInterval is how often the background cleanup deletes expired
	// marks; default 1h. The first pass runs when the
	// store is made. A negative interval turns the background cleanup off;
	// Cleanup still works.
	CleanupInterval time.Duration
	// Window is how long a mark counts, at least 1ms; default
	// idempotency.DefaultWindow.
	Window time.Duration
	// CleanupBatchSize is how many rows one cleanup transaction deletes at
	// most; default 5000.
	CleanupBatchSize int
	// Logger receives the background cleanup's failures (warn) and its
	// progress (debug); default slog.Default().
	Logger *slog.Logger
}

// setDefaults fills the zero fields with their defaults.
func (c *Config) setDefaults() {
	if c.Schema == "" {
		c.Schema = defaultSchema
	}
	if c.Table == "" {
		c.Table = defaultTable
	}
	if c.CleanupInterval == 0 {
		c.CleanupInterval = defaultCleanupInterval
	}
	if c.Window == 0 {
		c.Window = idempotency.DefaultWindow
	}
	if c.CleanupBatchSize == 0 {
		c.CleanupBatchSize = defaultCleanupBatchSize
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every field that cannot work, in one error that wraps
// koto.ErrInvalidConfig. Zero fields count as their defaults, so Config{}
// is valid. NewStore calls it.
func (c Config) Validate() error {
	c.setDefaults()
	p := config.For("postgres.Config")
	pgschema.CheckName(p, "Schema", c.Schema, pgschema.MaxIdentifier)
	pgschema.CheckName(p, "Table", c.Table, maxTable)
	if c.Window < time.Millisecond {
		p.Add("Window", "is %v; set it to at least 1ms, or 0 for the default (%v)", c.Window, idempotency.DefaultWindow)
	}
	if c.CleanupBatchSize <= 0 {
		p.Add("CleanupBatchSize", "is %d; set a positive number of rows, or 0 for the default (%d)", c.CleanupBatchSize, defaultCleanupBatchSize)
	}
	return p.Err()
}
