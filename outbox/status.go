package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/koto-dev/watermill-koto/internal/config"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/internal/pgschema"
)

// Status is the backlog of an outbox table and its schedule at one
// moment, as [Outbox.Status] reads it.
type Status struct {
	// Table is the outbox table as it appears in SQL, schema included.
	Table string
	// Waiting is the number of committed rows not yet forwarded.
	Waiting int64
	// Held is how many of them the forwarder cannot read yet: they were
	// committed after an older transaction, one anywhere in the cluster
	// that is still running, got its ID (see Forwarding in the package
	// documentation).
	Held int64
	// Oldest is when the oldest waiting row was written (its created_at,
	// the start of its transaction); zero when none waits.
	Oldest time.Time
	// Lag is the forwarder's lag: the age of the oldest waiting row, zero
	// when none waits.
	Lag time.Duration
	// Forwarder is the active forwarder, nil when none holds the table.
	Forwarder *ActiveForwarder
	// Scheduled is the number of scheduled messages not yet moved into
	// the outbox, due or not.
	Scheduled int64
	// NextDue is when the earliest of them is due; zero when none is
	// scheduled.
	NextDue time.Time
	// OldestScheduled is when the one scheduled longest ago was
	// scheduled; zero when none is.
	OldestScheduled time.Time
}

// ActiveForwarder is the forwarder that holds an outbox table's lock.
type ActiveForwarder struct {
	// PID is the PostgreSQL backend of its connection.
	PID int32
	// ApplicationName is its connection's application_name
	// (ForwarderConfig.ApplicationName); empty when the role reading the
	// status may not see it.
	ApplicationName string
}

// statusSQL reads a Status in one statement: the rows after the
// forwarder's position (all of them when it has none yet), and the
// backend that holds the forwarder's lock. $1 is the forwarder's group,
// $2 and $3 its lock key. created_at is a timestamp without time zone, so
// the age is taken against localtimestamp: right when writers and reader
// share a TimeZone setting, as with the server's default.
func statusSQL(t tables) string {
	return `WITH pos AS (
    SELECT coalesce((SELECT last_processed_transaction_id FROM ` + t.offsets + ` WHERE consumer_group = $1), '0'::xid8) AS xid,
        coalesce((SELECT offset_acked FROM ` + t.offsets + ` WHERE consumer_group = $1), 0) AS off,
        pg_snapshot_xmin(pg_current_snapshot()) AS xmin
), waiting AS (
    SELECT count(*) AS n,
        count(*) FILTER (WHERE transaction_id >= pos.xmin) AS held,
        min(created_at) AS oldest
    FROM ` + t.outbox + `, pos WHERE (transaction_id, "offset") > (pos.xid, pos.off)
), fwd AS (
    SELECT l.pid, coalesce(a.application_name, '') AS app FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND l.classid = $2::int4::oid AND l.objid = $3::int4::oid
    LIMIT 1
)
SELECT waiting.n, waiting.held, waiting.oldest::timestamptz,
    coalesce((extract(epoch FROM localtimestamp - waiting.oldest) * 1e6)::bigint, 0),
    fwd.pid, fwd.app,
    scheduled.n, scheduled.oldest,
    (SELECT due_at FROM ` + t.scheduled + ` ORDER BY id LIMIT 1)
FROM waiting LEFT JOIN fwd ON true,
    (SELECT count(*) AS n, min(created_at) AS oldest FROM ` + t.scheduled + `) AS scheduled`
}

// Status reads the backlog of the outbox table and of its schedule, in one read-only
// statement that holds nothing a forwarder waits for (see Status and
// metrics in the package documentation). Tables that do not exist are an
// error wrapping [ErrSchemaMissing].
func (o *Outbox) Status(ctx context.Context) (Status, error) {
	s := Status{Table: o.t.outbox}
	var (
		oldest *time.Time
		lagUS  int64
		pid    *int32
		app    *string
		next   *time.Time
		since  *time.Time
	)
	err := o.pool.QueryRow(ctx, statusSQL(o.t), forwarderGroup, pgschema.ClassForwarder, pgschema.LockObject(o.t.outbox)).
		Scan(&s.Waiting, &s.Held, &oldest, &lagUS, &pid, &app, &s.Scheduled, &since, &next)
	if err != nil {
		if pgschema.UndefinedTable(err) {
			return Status{}, fmt.Errorf("%w: %s or a table beside it does not exist: %w", ErrSchemaMissing, o.t.outbox, err)
		}
		return Status{}, fmt.Errorf("outbox: status of %s: %w", o.t.outbox, err)
	}
	if oldest != nil {
		s.Oldest = *oldest
		s.Lag = max(time.Duration(lagUS)*time.Microsecond, 0)
	}
	if pid != nil {
		s.Forwarder = &ActiveForwarder{PID: *pid, ApplicationName: *app}
	}
	if next != nil {
		s.NextDue = *next
	}
	if since != nil {
		s.OldestScheduled = *since
	}
	return s, nil
}

// messageColumns and offsetsColumns are the columns of watermill-sql's
// default PostgreSQL messages and offsets tables, by which FindTables
// recognises an outbox.
var (
	messageColumns = []string{"offset", "uuid", "created_at", "payload", "metadata", "transaction_id"}
	offsetsColumns = []string{"consumer_group", "offset_acked", "last_processed_transaction_id"}
)

// findTablesSQL lists the tables of schema $1 that have every column of
// $2 and an <table>_offsets table with every column of $3.
const findTablesSQL = `WITH cols AS (
    SELECT table_name, array_agg(column_name::text) AS names
    FROM information_schema.columns WHERE table_schema = $1 GROUP BY table_name
)
SELECT m.table_name FROM cols m JOIN cols o ON o.table_name = m.table_name || '` + offsetsSuffix + `'
WHERE m.names @> $2::text[] AND o.names @> $3::text[]
ORDER BY m.table_name`

// FindTables returns the Config of every outbox table in schema (default
// "koto"): each table with the columns of watermill-sql's
// default PostgreSQL messages table and a <table>_offsets table with
// those of its offsets table, by name. Only tables the pool's role may
// see are found. The Configs have their other fields zero.
func FindTables(ctx context.Context, pool *pgxpool.Pool, schema string) ([]Config, error) {
	if schema == "" {
		schema = defaultSchema
	}
	p := config.For("outbox.FindTables")
	pgschema.CheckName(p, "schema", schema, pgschema.MaxIdentifier)
	if err := p.Err(); err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, findTablesSQL, schema, messageColumns, offsetsColumns)
	if err != nil {
		return nil, fmt.Errorf("outbox: find the outbox tables of schema %s: %w", pgschema.QuoteIdent(schema), err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("outbox: find the outbox tables of schema %s: %w", pgschema.QuoteIdent(schema), err)
	}
	cfgs := make([]Config, len(names))
	for i, n := range names {
		cfgs[i] = Config{Schema: schema, Table: n}
	}
	return cfgs, nil
}
