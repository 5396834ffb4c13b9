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
