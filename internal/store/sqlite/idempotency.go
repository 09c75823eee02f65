package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/sqlstore"
)

// ClaimIdempotencyKey inserts rec in progress unless a live record holds
// the key; expired records and abandoned claims are replaced.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, rec store.IdempotencyRecord, at time.Time) (store.IdempotencyRecord, bool, error) {
	var held store.IdempotencyRecord
	claimed := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		cur, err := dec.Idempotency(tx.QueryRowContext(ctx, `SELECT `+sqlstore.IdemCols+` FROM idempotency_keys WHERE scope = ? AND key = ?`, rec.Scope, rec.Key))
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case !cur.ExpiresAt.After(at), !cur.Done && !cur.LockedUntil.After(at):
			if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE scope = ? AND key = ?`, rec.Scope, rec.Key); err != nil {
				return err
			}
		default:
			held = cur
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys (`+sqlstore.IdemCols+`) VALUES (?, ?, ?, ?, 0, 0, '{}', x'', ?, ?, ?)`,
			rec.Scope, rec.Key, rec.RequestHash, rec.Claim,
			formatTime(rec.CreatedAt, at), sandbox.FormatTime(rec.LockedUntil), sandbox.FormatTime(rec.ExpiresAt)); err != nil {
			return err
		}
		claimed = true
		held, err = dec.Idempotency(tx.QueryRowContext(ctx, `SELECT `+sqlstore.IdemCols+` FROM idempotency_keys WHERE scope = ? AND key = ?`, rec.Scope, rec.Key))
		return err
	})
	if err != nil {
		return store.IdempotencyRecord{}, false, fmt.Errorf("claim idempotency key: %w", err)
	}
	return held, claimed, nil
}
