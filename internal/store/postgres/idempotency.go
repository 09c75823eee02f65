package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/sqlstore"
)

// maxClaimRounds bounds ClaimIdempotencyKey's retries after losing an
// insert race; each lost race means another claim committed, which the
// next round then finds and answers with.
const maxClaimRounds = 5

// ClaimIdempotencyKey inserts rec in progress unless a live record holds
// the key; expired records and abandoned claims are replaced. The holding
// record is read FOR UPDATE, so of two callers replacing one abandoned
// claim the second waits and then finds the first's claim; two callers
// inserting a new key meet at the primary key, where the loser's insert
// waits for the winner to commit, inserts nothing, and the loser answers
// with the winner's record.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, rec store.IdempotencyRecord, at time.Time) (store.IdempotencyRecord, bool, error) {
	for range maxClaimRounds {
		var held store.IdempotencyRecord
		claimed, lost := false, false
		err := s.tx(ctx, func(tx pgx.Tx) error {
			claimed, lost = false, false
			cur, err := dec.Idempotency(tx.QueryRow(ctx, `SELECT `+sqlstore.IdemCols+` FROM idempotency_keys WHERE scope = $1 AND key = $2 FOR UPDATE`,
				rec.Scope, rec.Key))
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return err
			case !cur.ExpiresAt.After(at), !cur.Done && !cur.LockedUntil.After(at):
				if _, err := tx.Exec(ctx, `DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2`, rec.Scope, rec.Key); err != nil {
					return err
				}
			default:
				held = cur
				return nil
			}
			held, err = dec.Idempotency(tx.QueryRow(ctx, `INSERT INTO idempotency_keys (`+sqlstore.IdemCols+`)
				VALUES ($1, $2, $3, $4, false, 0, '{}', '', $5, $6, $7)
				ON CONFLICT DO NOTHING RETURNING `+sqlstore.IdemCols,
				rec.Scope, rec.Key, rec.RequestHash, rec.Claim, ts(rec.CreatedAt, at), ts(rec.LockedUntil, time.Time{}), ts(rec.ExpiresAt, time.Time{})))
			if errors.Is(err, pgx.ErrNoRows) {
				lost = true // a concurrent claim inserted first and has committed
				return nil
			}
			claimed = err == nil
			return err
		})
		if err != nil {
			return store.IdempotencyRecord{}, false, wrap("claim idempotency key", err)
		}
		if !lost {
			return held, claimed, nil
		}
	}
	return store.IdempotencyRecord{}, false, fmt.Errorf("claim idempotency key: lost %d races in a row", maxClaimRounds)
}
