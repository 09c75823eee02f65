package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

const idemCols = `scope, key, request_hash, claim, done, status, header, body, created_at, locked_until, expires_at`

// ClaimIdempotencyKey inserts rec in progress unless a live record holds
// the key; expired records and abandoned claims are replaced.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, rec store.IdempotencyRecord, at time.Time) (store.IdempotencyRecord, bool, error) {
	var held store.IdempotencyRecord
	claimed := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		cur, err := dec.Idempotency(tx.QueryRowContext(ctx, `SELECT `+idemCols+` FROM idempotency_keys WHERE scope = ? AND key = ?`, rec.Scope, rec.Key))
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
		if _, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys (`+idemCols+`) VALUES (?, ?, ?, ?, 0, 0, '{}', x'', ?, ?, ?)`,
			rec.Scope, rec.Key, rec.RequestHash, rec.Claim,
			formatTime(rec.CreatedAt, at), sandbox.FormatTime(rec.LockedUntil), sandbox.FormatTime(rec.ExpiresAt)); err != nil {
			return err
		}
		claimed = true
		held, err = dec.Idempotency(tx.QueryRowContext(ctx, `SELECT `+idemCols+` FROM idempotency_keys WHERE scope = ? AND key = ?`, rec.Scope, rec.Key))
		return err
	})
	if err != nil {
		return store.IdempotencyRecord{}, false, fmt.Errorf("claim idempotency key: %w", err)
	}
	return held, claimed, nil
}

// GetIdempotencyKey returns the record; ErrNotFound if absent.
func (s *Store) GetIdempotencyKey(ctx context.Context, scope, key string) (store.IdempotencyRecord, error) {
	r, err := dec.Idempotency(s.r.QueryRowContext(ctx, `SELECT `+idemCols+` FROM idempotency_keys WHERE scope = ? AND key = ?`, scope, key))
	if errors.Is(err, sql.ErrNoRows) {
		return store.IdempotencyRecord{}, fmt.Errorf("idempotency key: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.IdempotencyRecord{}, fmt.Errorf("get idempotency key: %w", err)
	}
	return r, nil
}

// FinishIdempotencyKey stores the answer of the claim rec.Claim.
func (s *Store) FinishIdempotencyKey(ctx context.Context, rec store.IdempotencyRecord) error {
	header := rec.Header
	if header == nil {
		header = map[string][]string{}
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("finish idempotency key: %w", err)
	}
	body := rec.Body
	if body == nil {
		body = []byte{}
	}
	res, err := s.w.ExecContext(ctx, `UPDATE idempotency_keys SET done = 1, status = ?, header = ?, body = ?
		WHERE scope = ? AND key = ? AND claim = ? AND done = 0`,
		rec.Status, string(hb), body, rec.Scope, rec.Key, rec.Claim)
	if err != nil {
		return fmt.Errorf("finish idempotency key: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("idempotency key claim: %w", store.ErrNotFound)
	}
	return nil
}

// ReleaseIdempotencyKey deletes the in-progress claim.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, scope, key, claim string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE scope = ? AND key = ? AND claim = ? AND done = 0`, scope, key, claim); err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// PurgeIdempotencyKeys deletes records expired at now.
func (s *Store) PurgeIdempotencyKeys(ctx context.Context, at time.Time) (int, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= ?`, sandbox.FormatTime(at))
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
