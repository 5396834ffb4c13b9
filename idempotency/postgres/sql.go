package postgres

import (
	"fmt"
	"time"
)

// statements is every SQL text a Store runs, built once by NewStore.
type statements struct {
	qualified   string // schema.table, quoted as needed
	schemaName  string // the schema, quoted as needed
	createSch   string
	createTable string // the table and its index
	isProcessed string
	mark        string // MarkProcessed: claim, with an asynchronous commit of its own
	checkMany   string // IsProcessed of concurrent callers: the keys of $1 that have a fresh mark
	markMany    string // MarkProcessed of concurrent callers: mark, for each key of $1
	claim       string // Transact and MarkProcessedTx: insert or renew; one row when it marks
	claimMany   string // TransactBatch: claim, for each key of $1, returning the keys it marked
	// cleanup is one batch of Cleanup: it locks up to $1 of the oldest
	// expired marks, skipping rows a concurrent claim holds, and deletes
	// them by ctid. The TID scan keeps a batch's cost proportional to the
	// batch; `message_id IN (subquery)` is planned as a hash semi join over
	// a sequential scan of the whole table, once per batch, which made a
	// pass quadratic in the table's size. The locked rows cannot move
	// before the DELETE, so their ctids stay valid.
	cleanup string
}

func buildStatements(cfg Config) statements {
	schema, table := quoteIdent(cfg.Schema), quoteIdent(cfg.Table)
	qualified := schema + "." + table
	index := quoteIdent("ix_" + cfg.Table + "_processed_at")
	window := intervalLiteral(cfg.Window)
	return statements{
		qualified:  qualified,
		schemaName: schema,
		createSch:  "CREATE SCHEMA IF NOT EXISTS " + schema + ";\n",
		createTable: "CREATE TABLE IF NOT EXISTS " + qualified + " (\n" +
			"    message_id   uuid PRIMARY KEY,\n" +
			"    processed_at timestamptz NOT NULL DEFAULT now()\n" +
			");\n" +
			"CREATE INDEX IF NOT EXISTS " + index + "\n" +
			"    ON " + qualified + " (processed_at);\n",
		isProcessed: "SELECT EXISTS (SELECT 1 FROM " + qualified +
			" WHERE message_id = $1 AND processed_at > now() - " + window + ")",
		mark: "WITH async AS (SELECT set_config('synchronous_commit', 'off', true))" +
			" INSERT INTO " + qualified + " AS m (message_id) SELECT $1::uuid FROM async" +
			" ON CONFLICT (message_id) DO UPDATE SET processed_at = now()" +
			" WHERE m.processed_at <= now() - " + window,
		checkMany: "SELECT message_id FROM " + qualified +
			" WHERE message_id = ANY($1::uuid[]) AND processed_at > now() - " + window,
		markMany: "WITH async AS (SELECT set_config('synchronous_commit', 'off', true))" +
			" INSERT INTO " + qualified + " AS m (message_id) SELECT k FROM async, unnest($1::uuid[]) AS k ORDER BY k" +
			" ON CONFLICT (message_id) DO UPDATE SET processed_at = now()" +
			" WHERE m.processed_at <= now() - " + window,
		claim: "INSERT INTO " + qualified + " AS m (message_id) VALUES ($1)" +
			" ON CONFLICT (message_id) DO UPDATE SET processed_at = now()" +
			" WHERE m.processed_at <= now() - " + window,
		claimMany: "INSERT INTO " + qualified + " AS m (message_id) SELECT k FROM unnest($1::uuid[]) AS k ORDER BY k" +
			" ON CONFLICT (message_id) DO UPDATE SET processed_at = now()" +
			" WHERE m.processed_at <= now() - " + window + " RETURNING m.message_id",
		cleanup: "DELETE FROM " + qualified + " WHERE ctid = ANY(ARRAY(SELECT ctid FROM " + qualified +
			" WHERE processed_at <= now() - " + window +
			" ORDER BY processed_at LIMIT $1 FOR UPDATE SKIP LOCKED))",
	}
}

// intervalLiteral writes a duration as an SQL interval, in microseconds,
// PostgreSQL's resolution.
func intervalLiteral(d time.Duration) string {
	return fmt.Sprintf("interval '%d microseconds'", d.Microseconds())
}

// SchemaSQL returns the DDL that creates the store's schema, table and
// index for cfg (zero fields mean their defaults), for people who run their
// own migrations. It is the DDL a Store runs on first use. With the
// defaults it is:
//
//	CREATE SCHEMA IF NOT EXISTS koto;
//	CREATE TABLE IF NOT EXISTS koto.processed_messages (
//	    message_id   uuid PRIMARY KEY,
//	    processed_at timestamptz NOT NULL DEFAULT now()
//	);
//	CREATE INDEX IF NOT EXISTS ix_processed_messages_processed_at
//	    ON koto.processed_messages (processed_at);
//
// Names that are not plain lower-case identifiers are quoted. SchemaSQL
// does not validate cfg; NewStore does.
func SchemaSQL(cfg Config) string {
	cfg.setDefaults()
	st := buildStatements(cfg)
	return st.createSch + st.createTable
}
