package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/IBM/sarama"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5"
)

// position is the forwarder's read position: the last forwarded row's
// (transaction_id, offset). Every row at or before it was forwarded.
type position struct {
	xid    uint64
	offset int64
}

// batch is the rows read after a position, ready to produce.
type batch struct {
	after   position
	end     position // the last row's position; after when there is none
	last    wsql.Row // the last row, for watermill-sql's ack query
	rows    int
	records []*sarama.ProducerMessage // fewer than rows if some are not message envelopes
	visible int                       // committed rows after `after`, up to one more than a batch
}

// held reports whether committed rows wait behind an older running
// transaction: more are committed than the guard let the read return.
func (b batch) held() bool { return b.visible > b.rows }

// read reads the batch after pos and turns its rows into Kafka records,
// in one round trip: the rows, and how many committed rows follow pos.
func (f *Forwarder) read(ctx context.Context, conn *pgx.Conn, pos position) (batch, error) {
	b := batch{after: pos, end: pos}
	var rows []wsql.Row
	err := f.query(ctx, func(ctx context.Context) error {
		q := &pgx.Batch{}
		q.Queue(f.sql.next, pos.xid, pos.offset)
		q.Queue(f.sql.visible, pos.xid, pos.offset, f.cfg.BatchSize+1)
		br := conn.SendBatch(ctx, q)
		var err error
		rows, err = f.scan(br)
		if err == nil {
			err = br.QueryRow().Scan(&b.visible)
		}
		return errors.Join(err, br.Close())
	})
	if err != nil {
		return batch{}, fmt.Errorf("read the outbox: %w", err)
	}
	if len(rows) > 0 {
		b.last = rows[len(rows)-1]
		xid, ok := b.last.ExtraData["transaction_id"].(wsql.XID8)
		if !ok {
			// watermill-sql changed how its default schema reads a row.
			return batch{}, fmt.Errorf("read the outbox: watermill-sql's row has transaction_id %T, not sql.XID8; "+
				"this watermill-sql version is not supported", b.last.ExtraData["transaction_id"])
		}
		b.end = position{xid: uint64(xid), offset: b.last.Offset}
		b.rows = len(rows)
		if b.records, err = f.records(ctx, rows); err != nil {
			return batch{}, err
		}
	}
	return b, nil
}

func (f *Forwarder) scan(br pgx.BatchResults) ([]wsql.Row, error) {
	pgRows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer pgRows.Close()
	var rows []wsql.Row
	for pgRows.Next() {
		row, err := f.sql.schema.UnmarshalMessage(wsql.UnmarshalMessageParams{Row: pgRows})
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, pgRows.Err()
}

// records turns rows into Kafka records. A row that is not a message
// envelope, which no Publisher writes, is logged and skipped: no retry
// could forward it. A row the Marshaler refuses fails the batch instead,
// so that none of it is produced or deleted (see Forwarding in the package
// documentation): a fix of the Marshaler can forward it.
func (f *Forwarder) records(ctx context.Context, rows []wsql.Row) ([]*sarama.ProducerMessage, error) {
	msgs := make([]*sarama.ProducerMessage, 0, len(rows))
	for _, row := range rows {
		topic, msg, err := unwrap(row.Payload)
		if err != nil {
			f.log.LogAttrs(ctx, slog.LevelError, "outbox row skipped: it cannot be forwarded",
				slog.String("row_uuid", string(row.UUID)), slog.Int64("offset", row.Offset),
				slog.String("payload", truncate(row.Payload, 1024)), slog.Any("error", err))
			continue
		}
		rec, err := f.producer.Marshaler.Marshal(topic, msg)
		if err != nil {
			// Run logs the error at each retry, so it names the row.
			return nil, fmt.Errorf("the Marshaler refused outbox row %s (offset %d, topic %s); its batch waits: %w",
				row.UUID, row.Offset, topic, err)
		}
		msgs = append(msgs, rec)
	}
	return msgs, nil
}

// truncate returns the first max bytes of b as a string, marked when cut.
func truncate(b []byte, max int) string {
	if len(b) <= max {
		return string(b)
	}
	return string(b[:max]) + "…"
}

// send produces the batch's records with one SendMessages call, in a
// goroutine, and returns a channel that gets its outcome. Nothing of
// PostgreSQL is held meanwhile.
func (f *Forwarder) send(b batch) <-chan error {
	done := make(chan error, 1)
	if len(b.records) == 0 {
		done <- nil
		return done
	}
	p := f.producer
	go func() {
		if err := p.SendMessages(b.records); err != nil {
			done <- fmt.Errorf("produce %d messages to Kafka: %w", len(b.records), summarise(err))
			return
		}
		done <- nil
	}()
	return done
}

// ack moves the position past b and deletes b's rows, in one round trip
// and one implicit transaction. It goes on when ctx is cancelled (bounded
// by QueryTimeout), so that a forwarder stopping after a produce records
// it instead of leaving it to be sent again.
func (f *Forwarder) ack(ctx context.Context, conn *pgx.Conn, b batch) error {
	err := f.query(context.WithoutCancel(ctx), func(ctx context.Context) error {
		q := f.sql.ack(b.last)
		pb := &pgx.Batch{}
		pb.Queue(q.Query, q.Args...)
		pb.Queue(f.sql.prune, b.after.xid, b.after.offset, b.end.xid, b.end.offset)
		return conn.SendBatch(ctx, pb).Close()
	})
	if err != nil {
		return fmt.Errorf("record the forwarded batch: %w", err)
	}
	f.forwarded.Add(int64(len(b.records)))
	f.log.LogAttrs(ctx, slog.LevelDebug, "outbox batch forwarded",
		slog.Int("messages", len(b.records)), slog.Uint64("transaction_id", b.end.xid), slog.Int64("offset", b.end.offset))
	return nil
}

// summarise shortens sarama's per-message errors to the first one and a
// count.
func summarise(err error) error {
	var pe sarama.ProducerErrors
	if errors.As(err, &pe) && len(pe) > 0 {
		return fmt.Errorf("%d messages failed, the first with: %w", len(pe), pe[0].Err)
	}
	return err
}
