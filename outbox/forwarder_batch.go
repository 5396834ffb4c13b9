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

// batchResult is what one batch did.
type batchResult struct {
	rows int  // rows read and forwarded
	held bool // committed rows wait behind an older running transaction
}

// forwardBatch reads the next batch, produces it to Kafka in one
// SendMessages call, and then, in one implicit transaction, moves the
// position past it and deletes its rows. No transaction is open while
// Kafka is called. A crash before the last step re-sends the batch.
func (f *Forwarder) forwardBatch(ctx context.Context, conn *pgx.Conn, pos *position) (batchResult, error) {
	rows, visible, err := f.read(ctx, conn, *pos)
	if err != nil || len(rows) == 0 {
		return batchResult{held: visible > 0}, err
	}
	msgs := f.records(ctx, rows)
	if len(msgs) > 0 {
		if err := f.producer.SendMessages(msgs); err != nil {
			f.closeProducer() // a new one starts clean after whatever went wrong
			return batchResult{}, fmt.Errorf("produce %d messages to Kafka: %w", len(msgs), summarise(err))
		}
	}
	last := rows[len(rows)-1]
	next := position{xid: uint64(last.ExtraData["transaction_id"].(wsql.XID8)), offset: last.Offset}
	if err := f.ack(ctx, conn, last, *pos, next); err != nil {
		return batchResult{}, err
	}
	*pos = next
	f.forwarded.Add(int64(len(msgs)))
	f.logBatch(ctx, len(msgs), next)
	return batchResult{rows: len(rows), held: visible > len(rows)}, nil
}

// read returns the next batch of rows and how many committed rows follow
// pos, up to one more than a batch, whether visible to the batch or not.
func (f *Forwarder) read(ctx context.Context, conn *pgx.Conn, pos position) (rows []wsql.Row, visible int, err error) {
	err = f.query(ctx, func(ctx context.Context) error {
		b := &pgx.Batch{}
		b.Queue(f.sql.selectBatch.Query, f.sql.selectBatch.Args...)
		b.Queue(f.sql.visible, pos.xid, pos.offset, f.cfg.BatchSize+1)
		br := conn.SendBatch(ctx, b)
		rows, err = f.scan(br)
		if err == nil {
			err = br.QueryRow().Scan(&visible)
		}
		return errors.Join(err, br.Close())
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read the outbox: %w", err)
	}
	return rows, visible, nil
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
// could forward it.
func (f *Forwarder) records(ctx context.Context, rows []wsql.Row) []*sarama.ProducerMessage {
	msgs := make([]*sarama.ProducerMessage, 0, len(rows))
	for _, row := range rows {
		topic, msg, err := unwrap(row.Payload)
		var rec *sarama.ProducerMessage
		if err == nil {
			rec, err = f.producer.Marshaler.Marshal(topic, msg)
		}
		if err != nil {
			f.log.LogAttrs(ctx, slog.LevelError, "outbox row skipped: it cannot be forwarded",
				slog.String("row_uuid", string(row.UUID)), slog.Int64("offset", row.Offset),
				slog.String("payload", string(row.Payload)), slog.Any("error", err))
			continue
		}
		msgs = append(msgs, rec)
	}
	return msgs
}

// ack moves the position from prev to next and deletes the rows between,
// in one round trip and one implicit transaction.
func (f *Forwarder) ack(ctx context.Context, conn *pgx.Conn, last wsql.Row, prev, next position) error {
	err := f.query(ctx, func(ctx context.Context) error {
		q := f.sql.ack(last)
		b := &pgx.Batch{}
		b.Queue(q.Query, q.Args...)
		b.Queue(f.sql.prune, prev.xid, prev.offset, next.xid, next.offset)
		return conn.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("record the forwarded batch: %w", err)
	}
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
