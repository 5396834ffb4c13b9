package outbox

import (
	"strconv"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
)

// forwarderSQL is what the forwarder runs: watermill-sql's own queries for
// its default PostgreSQL schema and offsets adapter where the table's
// format is concerned (the row mapping, the position, its initial value),
// and its own reads.
type forwarderSQL struct {
	schema  wsql.DefaultPostgreSQLSchema
	offsets wsql.DefaultPostgreSQLOffsetsAdapter

	// next reads the rows after a position, of transactions older than
	// every running one (transaction_id < pg_snapshot_xmin), in
	// (transaction_id, offset) order: watermill-sql's read, with the
	// position as arguments rather than read from the offsets table, so
	// that the next batch can be read before the last one is recorded.
	// Its columns are those watermill-sql's UnmarshalMessage scans.
	next string
	// initOffsets is watermill-sql's zero position of the group, inserted
	// if missing.
	initOffsets []wsql.Query
	// position reads the group's position.
	position string
	// visible counts, up to a limit, the committed rows after a position,
	// the visibility guard ignored: more than the batch read means rows
	// wait behind an older running transaction.
	visible string
	// prune deletes the rows between two positions, those just
	// forwarded.
	prune string

	// fire moves the scheduled messages after an ID ($3) and due by a
	// bound ID ($1), up to a limit ($2) in due order, into the outbox,
	// records them as sent and returns their IDs and due times. It skips
	// the rows a Cancel holds.
	fire string
	// nextDue reads the earliest schedule ID after an ID ($1).
	nextDue string
	// pruneSettled deletes, up to a limit ($2), the settled rows due
	// before a bound ID ($1).
	pruneSettled string
}

func newForwarderSQL(t tables, batch int) forwarderSQL {
	s := forwarderSQL{schema: t.schemaAdapter(batch), offsets: t.offsetsAdapter()}
	var err error
	s.initOffsets, err = s.offsets.BeforeSubscribingQueries(wsql.BeforeSubscribingQueriesParams{Topic: sqlTopic, ConsumerGroup: forwarderGroup})
	if err != nil {
		panic(err) // the default adapters never fail
	}
	s.next = `SELECT "offset", transaction_id, uuid, payload, metadata FROM ` + t.outbox +
		` WHERE (transaction_id, "offset") > ($1::xid8, $2::bigint)` +
		` AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())` +
		` ORDER BY transaction_id, "offset" LIMIT ` + strconv.Itoa(batch)
	s.position = `SELECT last_processed_transaction_id, coalesce(offset_acked, 0) FROM ` + t.offsets + ` WHERE consumer_group = $1`
	s.visible = `SELECT count(*) FROM (SELECT 1 FROM ` + t.outbox +
		` WHERE (transaction_id, "offset") > ($1::xid8, $2::bigint) LIMIT $3) AS rows`
	s.prune = `DELETE FROM ` + t.outbox +
		` WHERE (transaction_id, "offset") > ($1::xid8, $2::bigint) AND (transaction_id, "offset") <= ($3::xid8, $4::bigint)`
	s.fire = `WITH due AS (
    SELECT id FROM ` + t.scheduled + ` WHERE id > $3 AND id <= $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED
), moved AS (
    DELETE FROM ` + t.scheduled + ` AS s USING due WHERE s.id = due.id
    RETURNING s.id, s.due_at, s.uuid, s.payload, s.metadata
), settled AS (
    INSERT INTO ` + t.settled + ` (id, cancelled) SELECT id, false FROM moved
), forwarded AS (
    INSERT INTO ` + t.outbox + ` (uuid, payload, metadata, transaction_id)
    SELECT uuid, payload, metadata, pg_current_xact_id() FROM moved ORDER BY id
)
SELECT id, due_at FROM moved`
	s.nextDue = `SELECT id FROM ` + t.scheduled + ` WHERE id > $1 ORDER BY id LIMIT 1`
	s.pruneSettled = `DELETE FROM ` + t.settled + ` WHERE id IN (SELECT id FROM ` + t.settled + ` WHERE id < $1 ORDER BY id LIMIT $2)`
	return s
}

// ack returns watermill-sql's query that moves the group's position to
// row.
func (s forwarderSQL) ack(row wsql.Row) wsql.Query {
	q, err := s.offsets.AckMessageQuery(wsql.AckMessageQueryParams{Topic: sqlTopic, LastRow: row, ConsumerGroup: forwarderGroup})
	if err != nil {
		panic(err)
	}
	return q
}
