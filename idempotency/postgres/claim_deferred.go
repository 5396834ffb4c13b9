package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/koto-dev/watermill-koto/internal/pgschema"
)

// ErrDuplicate is what the handler's statements return under a deferred
// claim (idempotency.Claim.Defer) once the claim found a fresh mark of its
// key: the message is a duplicate, and the transaction was rolled back.
var ErrDuplicate = errors.New("postgres: the key has a fresh mark (a duplicate); the transaction was rolled back")

// claimTx is a transaction that begins, and claims its key, together with
// its first statement: the deferred claim of the package doc. It is a
// pgx.Tx, and, like one, not safe for concurrent use.
type claimTx struct {
	s     *Store
	key   string
	locks []string // locked between BEGIN and the claim

	tx     pgx.Tx // the transaction, once begun and claimed
	state  claimState
	err    error // why the claim failed, in claimFailed
	closed bool  // rolled back, or committed without a statement
}

var _ pgx.Tx = (*claimTx)(nil)

type claimState int

const (
	claimPending   claimState = iota // nothing sent yet
	claimHeld                        // begun and claimed: tx is open
	claimDuplicate                   // a fresh mark exists: nothing is open
	claimFailed                      // the begin or the claim failed: nothing is open
)

// deferClaim returns a claimTx for key on the store's pool, without a
// round trip: BEGIN, the lock of locks, the claim of key and the first
// statement of the transaction go to PostgreSQL together, when that
// statement runs.
func (s *Store) deferClaim(key string, locks []string) *claimTx {
	return &claimTx{s: s, key: key, locks: pgschema.NonEmpty(locks)}
}

// Outcome reports what became of the claim: sent is false while no
// statement has run (nor Commit), claimed is true when the transaction
// holds the claim, and err is the error that made the begin or the claim
// fail. Neither claimed nor err means a
// duplicate.
func (c *claimTx) Outcome() (sent, claimed bool, err error) {
	return c.state != claimPending, c.state == claimHeld, c.err
}

// Open returns the transaction that holds the claim, or nil while no
// statement has run or when the claim did not hold.
func (c *claimTx) Open() pgx.Tx {
	if c.state != claimHeld {
		return nil
	}
	return c.tx
}

// send sends BEGIN, before's statements, the claim and then's statements
// in one batch, and reads up to the claim. When it returns a nil error
// the claim is held and br is at then's first result; otherwise br is
// closed, nothing is left open and the error is ErrDuplicate or the
// failure.
func (c *claimTx) send(ctx context.Context, then func(b *pgx.Batch)) (br pgx.BatchResults, err error) {
	if c.state != claimPending {
		return nil, c.settled()
	}
	if err := c.s.ensure(ctx); err != nil {
		return nil, c.fail(err)
	}
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	if len(c.locks) > 0 {
		b.Queue(pgschema.LockKeysSQL, c.locks)
	}
	first := b.Len() - 1
	b.Queue(c.s.sql.claim, keyArg(c.key))
	prelude := b.Len()
	then(b)
	br = c.s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	claimed, err := readPrelude(br, first)
	if err != nil || !claimed {
		_ = br.Close()
		// A failed rollback closes the connection, which ends tx as well.
		_ = tx.Rollback(ctx)
		if preprocessing(err, b.QueuedQueries[prelude:]) {
			return nil, errAlone
		}
		if err != nil {
			return nil, c.fail(unavailable("begin and claim", err))
		}
		c.state = claimDuplicate
		return nil, ErrDuplicate
	}
	c.tx, c.state = tx, claimHeld
	return br, nil
}

// errAlone is what send returns when one of then's statements could not
// be prepared or encoded for the batch: nothing ran, and the statement runs
// on its own after the claim, to fail there with its own error.
var errAlone = errors.New("postgres: the statement cannot join the claim's batch")

// preprocessing reports whether err is pgx's failure to prepare or encode
// one of queued before sending anything.
func preprocessing(err error, queued []*pgx.QueuedQuery) bool {
	var pre pgx.ErrPreprocessingBatch
	if !errors.As(err, &pre) {
		return false
	}
	for _, q := range queued {
		if q.SQL == pre.SQL() {
			return true
		}
	}
	return false
}

// readPrelude reads the results of BEGIN, of first statements after it
// and of the claim: whether the claim inserted (or renewed) the mark.
func readPrelude(br pgx.BatchResults, first int) (bool, error) {
	for range 1 + first {
		if _, err := br.Exec(); err != nil {
			return false, err
		}
	}
	tag, err := br.Exec()
	return err == nil && tag.RowsAffected() == 1, err
}

func (c *claimTx) fail(err error) error {
	c.state, c.err = claimFailed, err
	return err
}

// settled is the error of a statement on a claimTx whose claim did not
// hold.
func (c *claimTx) settled() error {
	switch c.state {
	case claimDuplicate:
		return ErrDuplicate
	case claimFailed:
		return c.err
	}
	return pgx.ErrTxClosed
}

// begun returns the open transaction, beginning it with the claim alone
// if no statement has run yet, for the statements that cannot join the
// claim's round trip.
func (c *claimTx) begun(ctx context.Context) (pgx.Tx, error) {
	if c.state == claimHeld {
		return c.tx, nil
	}
	if c.closed {
		return nil, pgx.ErrTxClosed
	}
	br, err := c.send(ctx, func(*pgx.Batch) {})
	if err != nil {
		return nil, err
	}
	if err := br.Close(); err != nil {
		_ = c.tx.Rollback(ctx)
		c.tx = nil
		return nil, c.fail(unavailable("begin and claim", err))
	}
	return c.tx, nil
}

// Exec runs sql in the transaction; the first statement carries BEGIN and
// the claim. After a claim that found a fresh mark it returns
// [ErrDuplicate].
func (c *claimTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if c.fusing(args) {
		br, err := c.send(ctx, func(b *pgx.Batch) { b.Queue(sql, args...) })
		if err == nil {
			tag, err := br.Exec()
			if closeErr := br.Close(); err == nil {
				err = closeErr
			}
			return tag, err
		}
		if !errors.Is(err, errAlone) {
			return pgconn.CommandTag{}, err
		}
	}
	tx, err := c.begun(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return tx.Exec(ctx, sql, args...)
}

// QueryRow runs sql in the transaction, as Exec does.
func (c *claimTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if c.fusing(args) {
		br, err := c.send(ctx, func(b *pgx.Batch) { b.Queue(sql, args...) })
		if err == nil {
			return batchRow{br: br}
		}
		if !errors.Is(err, errAlone) {
			return errRow{err}
		}
	}
	tx, err := c.begun(ctx)
	if err != nil {
		return errRow{err}
	}
	return tx.QueryRow(ctx, sql, args...)
}

// fusing reports whether a statement with args is the first of the
// transaction and can join the claim's batch: it has arguments (pgx runs
// one without them with the simple protocol, which allows several
// statements in one string) and no option a batch ignores.
func (c *claimTx) fusing(args []any) bool {
	if c.state != claimPending || c.closed || len(args) == 0 {
		return false
	}
	_, mode := args[0].(pgx.QueryExecMode)
	return !mode
}

// batchRow is the row of a statement sent with the claim: scanning it
// closes the batch, which frees the connection.
type batchRow struct{ br pgx.BatchResults }

func (r batchRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	if closeErr := r.br.Close(); err == nil {
		err = closeErr
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// Query runs sql in the transaction, begun and claimed first if needed.
func (c *claimTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	tx, err := c.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Query(ctx, sql, args...)
}

// SendBatch sends b in the transaction, begun and claimed first if needed.
func (c *claimTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	tx, err := c.begun(ctx)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return tx.SendBatch(ctx, b)
}

// CopyFrom copies in the transaction, begun and claimed first if needed.
func (c *claimTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	tx, err := c.begun(ctx)
	if err != nil {
		return 0, err
	}
	return tx.CopyFrom(ctx, table, columns, src)
}

// Prepare prepares sql on the transaction's connection, begun and claimed
// first if needed.
func (c *claimTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	tx, err := c.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Prepare(ctx, name, sql)
}

// Begin starts a pseudo nested transaction (a savepoint), after beginning
// and claiming if needed.
func (c *claimTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := c.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
}

// LargeObjects returns the large objects of the transaction, begun and
// claimed first if needed (within the store's pool's own limits, since
// it takes no context). When that fails, its methods fail with
// pgx.ErrTxClosed.
func (c *claimTx) LargeObjects() pgx.LargeObjects {
	tx, err := c.begun(context.Background())
	if err != nil {
		// A zero pgx.LargeObjects has no transaction and its methods
		// panic; the closed transaction of a batch that never ran is the
		// only one pgx lets a caller make.
		b := &pgx.Batch{}
		b.BeginTx(pgx.TxOptions{})
		return pgx.FailedBatchResults(b, err).Tx().LargeObjects()
	}
	return tx.LargeObjects()
}

// Conn returns the transaction's connection, beginning and claiming first
// if needed; nil when that fails.
func (c *claimTx) Conn() *pgx.Conn {
	tx, err := c.begun(context.Background())
	if err != nil {
		return nil
	}
	return tx.Conn()
}

// Commit commits the transaction. When no statement has run, BEGIN, the
// claim and COMMIT go together; Outcome then tells whether it claimed.
// After a duplicate it returns [ErrDuplicate], after a failed claim its
// error.
func (c *claimTx) Commit(ctx context.Context) error {
	switch {
	case c.state == claimHeld:
		return c.tx.Commit(ctx)
	case c.state != claimPending:
		return c.settled()
	case c.closed:
		return pgx.ErrTxClosed
	}
	br, err := c.send(ctx, func(b *pgx.Batch) { b.Queue("COMMIT") })
	if err != nil {
		return err
	}
	_, err = br.Exec()
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	// After the COMMIT this only gives the connection back to the pool;
	// after a failed one it ends the transaction.
	_ = c.tx.Rollback(ctx)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Rollback rolls the transaction back; before any statement it only
// closes the claimTx, since nothing was sent.
func (c *claimTx) Rollback(ctx context.Context) error {
	if c.state == claimHeld {
		return c.tx.Rollback(ctx)
	}
	if c.closed || c.state != claimPending {
		return pgx.ErrTxClosed
	}
	c.closed = true
	return nil
}
