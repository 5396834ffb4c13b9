package outbox

import (
	"context"
	"fmt"

	"github.com/koto-dev/watermill-koto/internal/config"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/internal/pgschema"
)

// Outbox is one outbox table in a PostgreSQL database. It makes the
// publishers that write into it and the forwarder that empties it. It is
// safe for concurrent use and holds no resources of its own: the pool
// stays yours to close.
type Outbox struct {
	pool *pgxpool.Pool
	cfg  Config
	t    tables
}

// New returns the Outbox of pool's database as cfg says (zero fields mean
// their defaults). It refuses an invalid cfg with an error that wraps
// koto.ErrInvalidConfig and names the field. New does not touch the database;
// call Setup at startup.
func New(pool *pgxpool.Pool, cfg Config) (*Outbox, error) {
	if pool == nil {
		return nil, config.Invalid("outbox.New", "", "got a nil pool; pass a connected *pgxpool.Pool")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Outbox{pool: pool, cfg: cfg, t: newTables(cfg)}, nil
}

// Setup creates the schema and tables if they do not exist, each under a
// PostgreSQL advisory lock, so that instances starting together do not
// race; with DisableAutoCreateSchema it only checks that they exist and
// otherwise returns an error wrapping ErrSchemaMissing. It is idempotent
// and cheap once the tables exist. Publishers need the tables and never
// create them (DDL inside a business transaction would be wrong), so call
// Setup at startup; the forwarder runs it too.
func (o *Outbox) Setup(ctx context.Context) error {
	return o.setup(ctx, o.pool)
}

// setupDB is what setup needs of a pool or a connection.
type setupDB interface {
	pgschema.Querier
	pgschema.Beginner
}

func (o *Outbox) setup(ctx context.Context, db setupDB) error {
	objs := o.t.objects()
	exists, err := objs.Exist(ctx, db)
	switch {
	case err != nil:
		return fmt.Errorf("outbox: check tables %s: %w", o.t.outbox, err)
	case exists:
		return nil
	case o.cfg.DisableAutoCreateSchema:
		return fmt.Errorf("%w: %s or %s does not exist and DisableAutoCreateSchema is set; "+
			"create them in your migrations with the DDL from outbox.SchemaSQL, or unset DisableAutoCreateSchema",
			ErrSchemaMissing, o.t.outbox, o.t.offsets)
	}
	if err := objs.Create(ctx, db); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// Table returns the outbox table as it appears in SQL, schema included,
// quoted where needed.
func (o *Outbox) Table() string { return o.t.outbox }

// Channel returns the PostgreSQL notification channel the active
// forwarder listens on. A notification whose payload is a due time, in
// milliseconds since 1970, earlier than the one it waits for makes it move
// what is due by then (see Scheduling in the package documentation).
func (o *Outbox) Channel() string { return o.t.channel }
