package parking

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/internal/config"
	"github.com/koto-dev/watermill-koto/internal/pgschema"
	"github.com/koto-dev/watermill-koto/middleware"
	"github.com/koto-dev/watermill-koto/outbox"
)

// Store keeps parked messages in a PostgreSQL table and brings them back
// through an outbox's schedule; it is a middleware.ParkingStore. It is
// safe for concurrent use and holds no resources of its own.
type Store struct {
	pool  *pgxpool.Pool
	box   *outbox.Outbox
	cfg   Config
	table string // schema.table, quoted
	index string // the queue index, quoted, without the schema
}

var _ middleware.ParkingStore = (*Store)(nil)

// NewStore returns the Store of cfg (zero fields mean their defaults) on
// pool, which brings parked messages back through box, the outbox of the
// same database. It refuses an invalid cfg with an error that wraps
// koto.ErrInvalidConfig and names the field. It does not touch the
// database; call Setup at startup.
func NewStore(pool *pgxpool.Pool, box *outbox.Outbox, cfg Config) (*Store, error) {
	switch {
	case pool == nil:
		return nil, config.Invalid("parking.NewStore", "", "got a nil pool; pass a connected *pgxpool.Pool")
	case box == nil:
		return nil, config.Invalid("parking.NewStore", "", "got a nil outbox; pass the outbox.Outbox of the pool's database")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	schema := pgschema.QuoteIdent(cfg.Schema)
	return &Store{pool: pool, box: box, cfg: cfg,
		table: schema + "." + pgschema.QuoteIdent(cfg.Table),
		index: pgschema.QuoteIdent(cfg.Table + queueSuffix)}, nil
}

// Table returns the table as it appears in SQL, schema included, quoted
// where needed.
func (s *Store) Table() string { return s.table }

// Setup creates the schema and the table if they do not exist, under a
// PostgreSQL advisory lock; with DisableAutoCreateSchema it only checks
// that the table exists and otherwise returns an error wrapping
// ErrSchemaMissing. The outbox's tables are the outbox's Setup's.
func (s *Store) Setup(ctx context.Context) error {
	objs := s.objects()
	exists, err := objs.Exist(ctx, s.pool)
	switch {
	case err != nil:
		return fmt.Errorf("parking: check table %s: %w", s.table, err)
	case exists:
		return nil
	case s.cfg.DisableAutoCreateSchema:
		return fmt.Errorf("%w: %s does not exist and DisableAutoCreateSchema is set; "+
			"create it in your migrations with the DDL from parking.SchemaSQL, or unset DisableAutoCreateSchema", ErrSchemaMissing, s.table)
	}
	if err := objs.Create(ctx, s.pool); err != nil {
		return fmt.Errorf("parking: %w", err)
	}
	return nil
}

func (s *Store) objects() pgschema.Objects {
	schema := pgschema.QuoteIdent(s.cfg.Schema)
	return pgschema.Objects{
		Schema:    schema,
		Tables:    []string{s.table},
		SchemaDDL: "CREATE SCHEMA IF NOT EXISTS " + schema + ";\n",
		TablesDDL: tableDDL(s.table, s.index),
	}
}

// tableDDL creates the table and its queue index. A queue is the rows of
// one consumer group's record key on one partition, in seq order; a row
// without a key is a queue of its own.
func tableDDL(table, index string) string {
	return `CREATE TABLE IF NOT EXISTS ` + table + ` (
    id uuid PRIMARY KEY,
    seq bigserial NOT NULL,
    consumer_group text NOT NULL,
    topic text NOT NULL,
    "partition" integer NOT NULL,
    key bytea,
    "offset" bigint NOT NULL,
    message_uuid text NOT NULL,
    payload bytea NOT NULL,
    metadata json NOT NULL,
    parkings integer NOT NULL,
    history json NOT NULL,
    due_at timestamptz,
    schedule_id text,
    dead_letter boolean NOT NULL DEFAULT false,
    parked_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS ` + index + ` ON ` + table + ` (consumer_group, topic, "partition", key, seq);
`
}

// SchemaSQL returns the DDL that creates the schema and the table of cfg
// (zero fields mean their defaults), for people who run their own
// migrations; Setup runs the same. SchemaSQL does not validate cfg;
// NewStore does.
func SchemaSQL(cfg Config) string {
	cfg.setDefaults()
	schema := pgschema.QuoteIdent(cfg.Schema)
	return "CREATE SCHEMA IF NOT EXISTS " + schema + ";\n" +
		tableDDL(schema+"."+pgschema.QuoteIdent(cfg.Table), pgschema.QuoteIdent(cfg.Table+queueSuffix))
}

// inTx runs fn in a transaction on the pool, committed when fn returns
// nil, with the error of a missing table explained.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.pool, fn)
	if pgschema.UndefinedTable(err) {
		return fmt.Errorf("%w: %s: %w; call Store.Setup at startup, or create it with parking.SchemaSQL", ErrSchemaMissing, s.table, err)
	}
	return err
}

// Sentinel errors of this package; test for them with errors.Is.
var (
	// ErrSchemaMissing means the table does not exist.
	ErrSchemaMissing = errors.New("parking: table missing")
	// ErrNotParked means no message is parked under the ID given.
	ErrNotParked = errors.New("parking: no such parked message")
	// ErrNotFirst means the message waits behind another of its key,
	// which must run first.
	ErrNotFirst = errors.New("parking: parked behind another message of its key")
)
