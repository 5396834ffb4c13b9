package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/idempotency/postgres"
)

// ledger is a table where a batch handler writes one row per message, in
// the batch's transaction, and checks each key's order as it goes: a row
// of a key whose earlier message is not in the table yet is an error. With
// gaps, a key may skip messages (those dead-lettered), never go back.
type ledger struct {
	pool  *pgxpool.Pool
	table string
	state string // the next seq of each key
	gaps  bool
}

// newLedger returns the ledger of keys k0…k<keys-1>.
func newLedger(t *testing.T, pool *pgxpool.Pool, schema string, keys int, gaps bool) *ledger {
	t.Helper()
	l := &ledger{pool: pool, table: pgx.Identifier{schema, "ledger"}.Sanitize(), state: pgx.Identifier{schema, "ledger_next"}.Sanitize(), gaps: gaps}
	ddl := "CREATE TABLE " + l.table + " (key text NOT NULL, seq int NOT NULL, uuid text NOT NULL);" +
		"CREATE TABLE " + l.state + " (key text PRIMARY KEY, next int NOT NULL);" +
		"INSERT INTO " + l.state + " SELECT 'k' || i, 0 FROM generate_series(0, " + strconv.Itoa(keys-1) + ") AS i"
	if _, err := pool.Exec(context.Background(), ddl); err != nil {
		t.Fatalf("create ledger: %v", err)
	}
	return l
}

// entry is the payload of a ledger message: "key/seq".
func entry(key string, seq int) []byte { return []byte(key + "/" + strconv.Itoa(seq)) }

func parseEntry(msg *message.Message) (key string, seq int, err error) {
	key, s, _ := strings.Cut(string(msg.Payload), "/")
	seq, err = strconv.Atoi(s)
	return key, seq, err
}

// write records msgs in the transaction of ctx, in one round trip; a
// message out of its key's order makes the whole batch fail with an error
// that names it.
func (l *ledger) write(ctx context.Context, msgs []*message.Message) error {
	tx, ok := postgres.TxFromContext(ctx)
	if !ok {
		return koto.Poison(errors.New("no transaction in the batch's context"))
	}
	return l.writeTx(ctx, tx, msgs)
}

// writeTx records msgs in tx, as write does.
func (l *ledger) writeTx(ctx context.Context, tx pgx.Tx, msgs []*message.Message) error {
	b := &pgx.Batch{}
	for _, m := range msgs {
		key, seq, err := parseEntry(m)
		if err != nil {
			return koto.Poison(err)
		}
		cmp := "="
		if l.gaps {
			cmp = "<="
		}
		b.Queue("UPDATE "+l.state+" SET next = $2 + 1 WHERE key = $1 AND next "+cmp+" $2", key, seq)
		b.Queue("INSERT INTO "+l.table+" (key, seq, uuid) VALUES ($1, $2, $3)", key, seq, m.UUID)
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for _, m := range msgs {
		tag, err := br.Exec()
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return koto.Poison(fmt.Errorf("message %s (%s) is out of its key's order", m.UUID, m.Payload))
		}
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}

// check fails t unless the ledger holds exactly keys × perKey rows, each
// key's seqs 0..perKey-1 once each.
func (l *ledger) check(t *testing.T, keys, perKey int) {
	t.Helper()
	var rows, distinct, keyCount int
	err := l.pool.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT (key, seq)), count(DISTINCT key) FROM "+l.table).Scan(&rows, &distinct, &keyCount)
	if err != nil {
		t.Fatalf("read ledger: %v", err)
	}
	if want := keys * perKey; rows != want || distinct != want || keyCount != keys {
		t.Errorf("ledger has %d rows, %d distinct, of %d keys; want %d of %d keys, each once", rows, distinct, keyCount, want, keys)
	}
}

// checkDistinct fails t if a message is in the ledger twice.
func (l *ledger) checkDistinct(t *testing.T) {
	t.Helper()
	var rows, distinct int
	err := l.pool.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT uuid) FROM "+l.table).Scan(&rows, &distinct)
	if err != nil {
		t.Fatalf("read ledger: %v", err)
	}
	if rows != distinct {
		t.Errorf("ledger has %d rows of %d distinct messages: a message was written twice", rows, distinct)
	}
}

func (l *ledger) rows() int {
	var n int
	if err := l.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+l.table).Scan(&n); err != nil {
		return -1
	}
	return n
}

// keyedMessages returns perKey messages for each of keys keys, in each
// key's order, interleaved: message i has key i%keys.
func keyedMessages(keys, perKey int) []*message.Message {
	msgs := make([]*message.Message, 0, keys*perKey)
	for i := range keys * perKey {
		key := "k" + strconv.Itoa(i%keys)
		m := message.NewMessage(watermill.NewUUID(), entry(key, i/keys))
		m.Metadata.Set(koto.PartitionKeyMetadataKey, key)
		msgs = append(msgs, m)
	}
	return msgs
}
