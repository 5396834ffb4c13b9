package outbox

import (
	"fmt"
	"hash/fnv"
	"strings"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/internal/pgschema"
	"github.com/koto-dev/watermill-koto/internal/scheduleid"
)

// sqlTopic is the topic name handed to watermill-sql's adapters. They are
// configured to map every topic to the one outbox table, so it only labels
// their queries.
const sqlTopic = "outbox"

// tables names the outbox's tables, quoted, and builds watermill-sql's
// adapters on them, whose queries keep the tables in watermill-sql's
// default PostgreSQL format.
type tables struct {
	schema    string // quoted
	outbox    string // schema.table, quoted
	offsets   string // schema.table_offsets, quoted
	scheduled string // schema.table_scheduled, quoted: the messages not due yet
	settled   string // schema.table_settled, quoted: what became of the ones sent or cancelled
	channel   string // the NOTIFY channel, unquoted
}

func newTables(cfg Config) tables {
	schema := pgschema.QuoteIdent(cfg.Schema)
	in := func(suffix string) string { return schema + "." + pgschema.QuoteIdent(cfg.Table+suffix) }
	return tables{
		schema:    schema,
		outbox:    in(""),
		offsets:   in(offsetsSuffix),
		scheduled: in(scheduleid.ScheduledSuffix),
		settled:   in(scheduleid.SettledSuffix),
		channel:   channelName(cfg.Schema, cfg.Table),
	}
}

// schemaAdapter is watermill-sql's default PostgreSQL schema on the outbox
// table, reading batch rows at a time.
func (t tables) schemaAdapter(batch int) wsql.DefaultPostgreSQLSchema {
	return wsql.DefaultPostgreSQLSchema{
		GenerateMessagesTableName:          func(string) string { return t.outbox },
		SubscribeBatchSize:                 batch,
		InitializeSchemaWithoutTransaction: true, // pgschema locks instead
	}
}

// offsetsAdapter is watermill-sql's default PostgreSQL offsets adapter on
// the offsets table.
func (t tables) offsetsAdapter() wsql.DefaultPostgreSQLOffsetsAdapter {
	return wsql.DefaultPostgreSQLOffsetsAdapter{
		GenerateMessagesOffsetsTableName: func(string) string { return t.offsets },
	}
}

// objects describes the schema and tables for pgschema.
func (t tables) objects() pgschema.Objects {
	return pgschema.Objects{
		Schema:    t.schema,
		Tables:    []string{t.outbox, t.offsets, t.scheduled, t.settled},
		SchemaDDL: "CREATE SCHEMA IF NOT EXISTS " + t.schema + ";\n",
		TablesDDL: t.tablesDDL(),
	}
}

// tablesDDL is watermill-sql's DDL for the outbox and offsets tables,
// re-indented, and the DDL of the schedule's.
func (t tables) tablesDDL() string {
	msgs, err := t.schemaAdapter(1).SchemaInitializingQueries(wsql.SchemaInitializingQueriesParams{Topic: sqlTopic})
	if err != nil {
		panic(err) // the default adapter never fails
	}
	offs, err := t.offsetsAdapter().SchemaInitializingQueries(wsql.OffsetsSchemaInitializingQueriesParams{Topic: sqlTopic})
	if err != nil {
		panic(err)
	}
	var b strings.Builder
	for _, q := range append(msgs, offs...) {
		b.WriteString(dedent(q.Query))
	}
	b.WriteString(t.scheduleDDL())
	return b.String()
}

// scheduleDDL creates the tables of the schedule (see Scheduling in the
// package documentation). A schedule's id is a UUIDv7 whose time is its
// due time, so the primary key orders the scheduled table by due time and
// the settled table by the time its rows may be pruned.
func (t tables) scheduleDDL() string {
	return `CREATE TABLE IF NOT EXISTS ` + t.scheduled + ` (
    id uuid PRIMARY KEY,
    due_at timestamptz NOT NULL,
    uuid varchar(36) NOT NULL,
    payload json NOT NULL,
    metadata json,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS ` + t.settled + ` (
    id uuid PRIMARY KEY,
    cancelled boolean NOT NULL,
    settled_at timestamptz NOT NULL DEFAULT now()
);
`
}

// dedent trims a statement, indents its inner lines by four spaces and
// ends it with ";\n".
func dedent(stmt string) string {
	lines := strings.Split(strings.TrimSuffix(strings.TrimSpace(stmt), ";"), "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if i > 0 && i < len(lines)-1 {
			l = "    " + l
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n") + ";\n"
}

// channelName is the NOTIFY channel of a table: "schema.table" when it
// fits an identifier, else a prefix of it and a hash of the whole.
func channelName(schema, table string) string {
	name := schema + "." + table
	if len(name) <= pgschema.MaxIdentifier {
		return name
	}
	suffix := fmt.Sprintf("_%016x", hash64(name))
	cut := pgschema.MaxIdentifier - len(suffix)
	for cut > 0 && !utf8Start(name[cut]) {
		cut--
	}
	return name[:cut] + suffix
}

// utf8Start reports whether b starts a UTF-8 sequence.
func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func hash64(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// listenSQL is the LISTEN statement of the channel, quoted.
func (t tables) listenSQL() string { return "LISTEN " + pgx.Identifier{t.channel}.Sanitize() }

// SchemaSQL returns the DDL that creates the outbox's schema and tables for
// cfg (zero fields mean their defaults), for people who run their own
// migrations; Setup runs the same. The outbox table is watermill-sql's
// default PostgreSQL messages table, the offsets table its default offsets
// table; the scheduled and settled tables hold the schedule. With the
// defaults it is:
//
//	CREATE SCHEMA IF NOT EXISTS koto;
//	CREATE TABLE IF NOT EXISTS koto.outbox (
//	    "offset" BIGSERIAL,
//	    "uuid" VARCHAR(36) NOT NULL,
//	    "created_at" TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
//	    "payload" JSON DEFAULT NULL,
//	    "metadata" JSON DEFAULT NULL,
//	    "transaction_id" xid8 NOT NULL,
//	    PRIMARY KEY ("transaction_id", "offset")
//	);
//	CREATE TABLE IF NOT EXISTS koto.outbox_offsets (
//	    consumer_group VARCHAR(255) NOT NULL,
//	    offset_acked BIGINT,
//	    last_processed_transaction_id xid8 NOT NULL,
//	    PRIMARY KEY(consumer_group)
//	);
//	CREATE TABLE IF NOT EXISTS koto.outbox_scheduled (
//	    id uuid PRIMARY KEY,
//	    due_at timestamptz NOT NULL,
//	    uuid varchar(36) NOT NULL,
//	    payload json NOT NULL,
//	    metadata json,
//	    created_at timestamptz NOT NULL DEFAULT now()
//	);
//	CREATE TABLE IF NOT EXISTS koto.outbox_settled (
//	    id uuid PRIMARY KEY,
//	    cancelled boolean NOT NULL,
//	    settled_at timestamptz NOT NULL DEFAULT now()
//	);
//
// Names that are not plain lower-case identifiers are quoted. SchemaSQL
// does not validate cfg; New does.
func SchemaSQL(cfg Config) string {
	cfg.setDefaults()
	o := newTables(cfg).objects()
	return o.SchemaDDL + o.TablesDDL
}
