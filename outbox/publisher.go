package outbox

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/internal/pgschema"
	"github.com/koto-dev/watermill-koto/internal/pgtx"
	"github.com/koto-dev/watermill-koto/topics"
)

// Publisher is a message.Publisher that writes messages into the outbox
// table inside a PostgreSQL transaction, from which the forwarder sends
// them to Kafka once the transaction has committed. Make one with
// [Outbox.Publisher] for a given transaction, or with
// [Outbox.ContextPublisher] to use the transaction in each message's
// context. It is safe for concurrent use as far as its transaction is.
type Publisher struct {
	o    *Outbox
	tx   pgx.Tx // nil: the transaction in the message's context
	auto bool   // a message without one gets a transaction of its own
}

var _ message.Publisher = (*Publisher)(nil)

// Publisher returns a Publisher that writes into tx. Commit or roll back
// tx yourself, through the pgx.Tx.
func (o *Outbox) Publisher(tx pgx.Tx) *Publisher { return &Publisher{o: o, tx: tx} }

// ContextPublisher returns a Publisher that writes each message into the
// transaction in the message's context (of [Outbox.Transact] or of a
// transactional handler). A message without one is an error wrapping
// ErrNoTransaction: it is never published some other way. Point the cqrs
// publishers at it to send their messages through the outbox.
func (o *Outbox) ContextPublisher() *Publisher { return &Publisher{o: o} }

// AutoTxPublisher returns a Publisher like [Outbox.ContextPublisher],
// except that the messages of a Publish call that find no transaction in
// their context are written together in a transaction of their own, on
// the Outbox's pool, committed before Publish returns. They still reach
// Kafka only through the forwarder: durable, and in order with the other
// messages of the outbox. Use it where a message announces nothing that a
// transaction writes (a scheduled reminder, a notice); where it does,
// ContextPublisher's ErrNoTransaction catches the code that lost its
// transaction on the way.
func (o *Outbox) AutoTxPublisher() *Publisher { return &Publisher{o: o, auto: true} }

// InContextTransaction reports whether p writes each message into the
// transaction in its context, as [Outbox.ContextPublisher]'s alone does;
// a nil p does not.
func (p *Publisher) InContextTransaction() bool { return p != nil && p.tx == nil && !p.auto }

// Publish writes msgs, in order, into the outbox in the transaction, for
// topic, with a notification that wakes the forwarder on commit. A message
// without a UUID gets a UUIDv7 and one without a correlation ID gets its
// context's (see Writing in the package documentation); both are set on
// msg. Nothing is written when topic or a message cannot go to Kafka (an
// error wrapping [ErrInvalidMessage], marked koto.Poison, since no
// retry can change it) or a message has no transaction in reach
// ([ErrNoTransaction]). After an error of the database the transaction is
// aborted: roll it back.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if err := p.o.check(topic, msgs); err != nil {
		return err
	}
	err := p.inTransactions(msgs, func(ctx context.Context, tx pgx.Tx, u *pgtx.Unit, msgs []*message.Message) error {
		return p.o.write(ctx, tx, u, topic, msgs)
	})
	if errors.Is(err, ErrNoTransaction) {
		return fmt.Errorf("outbox: publishing %d message(s) to %s: %w", len(msgs), topic, err)
	}
	return err
}

// writeFunc writes msgs in tx, whose unit u is nil when the Publisher
// owns tx rather than a context.
type writeFunc func(ctx context.Context, tx pgx.Tx, u *pgtx.Unit, msgs []*message.Message) error

// inTransactions calls write with msgs in the Publisher's transactions:
// its own tx, or, grouped, the transactions of their contexts, or, for
// AutoTxPublisher's messages without one, one of their own, committed
// when write returns.
func (p *Publisher) inTransactions(msgs []*message.Message, write writeFunc) error {
	if p.tx != nil {
		return write(msgs[0].Context(), p.tx, nil, msgs)
	}
	groups, err := byTransaction(msgs, p.auto)
	if err != nil {
		return err
	}
	for _, g := range groups {
		if err := p.o.writeGroup(g, write); err != nil {
			return err
		}
	}
	return nil
}

// check gives msgs what a direct publish would (see prepare) and checks
// that Kafka can take them; its errors are poison.
func (o *Outbox) check(topic string, msgs []*message.Message) error {
	if err := topics.Validate(topic); err != nil {
		return koto.Poison(fmt.Errorf("%w: %w", ErrInvalidMessage, err))
	}
	for _, msg := range msgs {
		if err := o.prepare(msg); err != nil {
			return koto.Poison(err)
		}
	}
	return nil
}

// writeGroup writes g into its transaction, or, for the messages that have
// none, into one of their own.
func (o *Outbox) writeGroup(g *txGroup, write writeFunc) error {
	if g.tx != nil {
		return write(g.ctx, g.tx, g.unit, g.msgs)
	}
	return o.Transact(g.ctx, func(ctx context.Context, tx pgx.Tx) error {
		return write(ctx, tx, nil, g.msgs)
	})
}

// Close does nothing: the transaction is the caller's. It returns nil.
func (p *Publisher) Close() error { return nil }

// txGroup is the messages of one Publish call that share a transaction.
type txGroup struct {
	ctx  context.Context
	tx   pgx.Tx
	unit *pgtx.Unit
	msgs []*message.Message
}

// byTransaction groups msgs by the transaction in their contexts, keeping
// their order within each group. A message without one fails the whole
// call before anything is written, unless own allows it: such messages
// then form a group of their own, with a nil tx.
func byTransaction(msgs []*message.Message, own bool) ([]*txGroup, error) {
	var groups []*txGroup
	for i, msg := range msgs {
		u, ok := pgtx.From(msg.Context())
		if !ok && !own {
			return nil, fmt.Errorf("%w: message %d (%s) has no transaction in its context; "+
				"publish inside Outbox.Transact or a transactional handler, or use Outbox.Publisher(tx)",
				ErrNoTransaction, i, msg.UUID)
		}
		var g *txGroup
		for _, have := range groups {
			if have.unit == u {
				g = have
			}
		}
		if g == nil {
			g = &txGroup{ctx: msg.Context(), unit: u}
			if u != nil {
				g.tx = u.Tx
			}
			groups = append(groups, g)
		}
		g.msgs = append(g.msgs, msg)
	}
	return groups, nil
}

// prepare gives msg the UUID and correlation ID a direct publish would
// carry, and checks that Kafka can take it.
func (o *Outbox) prepare(msg *message.Message) error {
	if msg.UUID == "" {
		msg.UUID = correlation.NewID()
	}
	correlation.Stamp(msg.Context(), msg)
	size := len(msg.UUID) + len(msg.Payload) + len(msg.Metadata.Get(koto.PartitionKeyMetadataKey))
	for k, v := range msg.Metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("%w: message %s: metadata %q is not valid UTF-8", ErrInvalidMessage, msg.UUID, k)
		}
		size += len(k) + len(v)
	}
	if size > o.cfg.MaxMessageBytes {
		return fmt.Errorf("%w: message %s has %d bytes of payload, metadata, UUID and key, more than MaxMessageBytes (%d)",
			ErrInvalidMessage, msg.UUID, size, o.cfg.MaxMessageBytes)
	}
	return nil
}

// write inserts msgs into the outbox in tx, one statement per message and
// a pg_notify, all in one round trip.
func (o *Outbox) write(ctx context.Context, tx pgx.Tx, u *pgtx.Unit, topic string, msgs []*message.Message) error {
	if ctx == nil {
		ctx = context.Background()
	}
	b := &pgx.Batch{}
	for _, msg := range msgs {
		q, err := o.insertQuery(topic, msg)
		if err != nil {
			return err
		}
		b.Queue(q.Query, q.Args...)
	}
	b.Queue("SELECT pg_notify($1, '')", o.t.channel)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return o.writeError(topic, len(msgs), err)
	}
	if u != nil {
		u.Wrote(len(msgs))
	}
	return nil
}

// insertQuery is watermill-sql's insert of msg's row: its arguments are
// the row's uuid (the message's idempotency key), its payload (the
// envelope) and its metadata.
func (o *Outbox) insertQuery(topic string, msg *message.Message) (wsql.Query, error) {
	env, err := wrap(topic, msg)
	if err != nil {
		return wsql.Query{}, fmt.Errorf("%w: message %s: %w", ErrInvalidMessage, msg.UUID, err)
	}
	row := message.NewMessage(idempotency.KeyUUID(msg.UUID).String(), env)
	q, err := o.t.schemaAdapter(1).InsertQuery(wsql.InsertQueryParams{Topic: sqlTopic, Msgs: message.Messages{row}})
	if err != nil {
		return wsql.Query{}, fmt.Errorf("outbox: insert query: %w", err)
	}
	return q, nil
}

// writeError explains an error of the insert.
func (o *Outbox) writeError(topic string, n int, err error) error {
	if pgschema.UndefinedTable(err) {
		return fmt.Errorf("%w: writing %d message(s) for %s into %s: %w; call Outbox.Setup at startup, or create the tables with outbox.SchemaSQL",
			ErrSchemaMissing, n, topic, o.t.outbox, err)
	}
	return fmt.Errorf("outbox: writing %d message(s) for %s into %s: %w", n, topic, o.t.outbox, err)
}
