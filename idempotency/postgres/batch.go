package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	koto "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/idempotency"
	"github.com/koto-dev/watermill-koto/internal/pgschema"
	"github.com/koto-dev/watermill-koto/internal/pgtx"
)

var _ idempotency.BatchStore = (*Store)(nil)
var _ idempotency.TxBatchStore = (*Store)(nil)

// ProcessedKeys returns the keys among keys that have a mark younger than
// the window, in one statement. Errors are outages, as IsProcessed's.
func (s *Store) ProcessedKeys(ctx context.Context, keys []string) (map[string]bool, error) {
	if len(keys) == 0 {
		return map[string]bool{}, nil
	}
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	args, byUUID := keyArgs(keys)
	found, err := s.sendChecks(ctx, args)
	if err != nil {
		return nil, unavailable("check", err)
	}
	out := make(map[string]bool, len(found))
	for id := range found {
		for _, k := range byUUID[id] {
			out[k] = true
		}
	}
	return out, nil
}

// MarkProcessedKeys marks every key of keys in one statement, committed as
// MarkProcessed commits. Errors are outages.
func (s *Store) MarkProcessedKeys(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if err := s.ensure(ctx); err != nil {
		return err
	}
	args, _ := keyArgs(keys)
	if _, err := s.sendMarks(ctx, args); err != nil {
		return unavailable("mark", err)
	}
	return nil
}

// TransactBatch runs fn in a transaction on the store's pool that claims
// every key of c.Keys in one statement (see the package doc, Batches).
// Errors are those of [Store.Transact]; in addition a serialization
// failure or a deadlock in fn's statements is an outage, so that the
// batch is run again as it is rather than taken apart.
func (s *Store) TransactBatch(ctx context.Context, c idempotency.BatchClaim, fn func(claimed []bool, bind func(context.Context) context.Context) error) error {
	if err := checkLockKeys(c.LockKeys); err != nil {
		return err
	}
	if err := s.ensure(ctx); err != nil {
		return err
	}
	tx, claimed, err := s.beginBatch(ctx, c)
	if err != nil {
		return koto.Outage(fmt.Errorf("postgres: transactional batch claim: %w", err))
	}
	defer rollback(ctx, tx, c.Timeout)
	if !slices.Contains(claimed, true) {
		return nil
	}
	u := pgtx.NewUnit(tx)
	if err := fn(claimed, u.Bind); err != nil {
		return conflict(failed(tx, err))
	}
	if err := commit(ctx, tx, c.Timeout); err != nil {
		return conflict(err)
	}
	u.Committed()
	return nil
}

// beginBatch begins a transaction that locks c.LockKeys and claims c.Keys,
// in one round trip, and reports which keys it claimed.
func (s *Store) beginBatch(ctx context.Context, c idempotency.BatchClaim) (pgx.Tx, []bool, error) {
	ctx, cancel := withTimeout(ctx, c.Timeout)
	defer cancel()
	args, _ := keyArgs(c.Keys)
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	if locks := pgschema.NonEmpty(c.LockKeys); len(locks) > 0 {
		b.Queue(pgschema.LockKeysSQL, locks)
	}
	prelude := b.Len() - 1
	b.Queue(s.sql.claimMany, args)
	br := s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	marked, err := readBatchClaim(br, prelude)
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, nil, unavailable("begin and claim", err)
	}
	claimed := make([]bool, len(c.Keys))
	for i, k := range c.Keys {
		claimed[i] = marked[idempotency.KeyUUID(k)]
	}
	return tx, claimed, nil
}

// readBatchClaim reads the results of BEGIN and the prelude statements
// after it, then the keys the claim marked.
func readBatchClaim(br pgx.BatchResults, prelude int) (map[[16]byte]bool, error) {
	for range 1 + prelude {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	marked := map[[16]byte]bool{}
	var k pgtype.UUID
	_, err = pgx.ForEachRow(rows, []any{&k}, func() error {
		marked[k.Bytes] = true
		return nil
	})
	return marked, err
}

// keyArgs returns the distinct stored UUIDs of keys, in ascending order so
// that statements on overlapping keys lock them in the same order, and
// the keys of each UUID.
func keyArgs(keys []string) ([]pgtype.UUID, map[[16]byte][]string) {
	byUUID := make(map[[16]byte][]string, len(keys))
	args := make([]pgtype.UUID, 0, len(keys))
	for _, k := range keys {
		id := idempotency.KeyUUID(k)
		if _, seen := byUUID[id]; !seen {
			args = append(args, pgtype.UUID{Bytes: id, Valid: true})
		}
		byUUID[id] = append(byUUID[id], k)
	}
	slices.SortFunc(args, func(a, b pgtype.UUID) int { return bytes.Compare(a.Bytes[:], b.Bytes[:]) })
	return args, byUUID
}

// conflict marks a serialization failure or a deadlock as an outage:
// PostgreSQL aborted the transaction for what others did at the same time,
// and running it again as it is succeeds.
func conflict(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01") {
		return koto.Outage(err)
	}
	return err
}
