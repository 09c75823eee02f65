package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/store"
)

const idemCols = `scope, key, request_hash, claim, done, status, header, body, created_at, locked_until, expires_at`

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
			cur, err := dec.Idempotency(tx.QueryRow(ctx, `SELECT `+idemCols+` FROM idempotency_keys WHERE scope = $1 AND key = $2 FOR UPDATE`,
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
			held, err = dec.Idempotency(tx.QueryRow(ctx, `INSERT INTO idempotency_keys (`+idemCols+`)
				VALUES ($1, $2, $3, $4, false, 0, '{}', '', $5, $6, $7)
				ON CONFLICT DO NOTHING RETURNING `+idemCols,
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

// GetIdempotencyKey returns the record; ErrNotFound if absent.
func (s *Store) GetIdempotencyKey(ctx context.Context, scope, key string) (store.IdempotencyRecord, error) {
	rec, err := dec.Idempotency(s.pool.QueryRow(ctx, `SELECT `+idemCols+` FROM idempotency_keys WHERE scope = $1 AND key = $2`, scope, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.IdempotencyRecord{}, fmt.Errorf("idempotency key: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.IdempotencyRecord{}, fmt.Errorf("get idempotency key: %w", err)
	}
	return rec, nil
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
	tag, err := s.pool.Exec(ctx, `UPDATE idempotency_keys SET done = true, status = $1, header = $2, body = $3
		WHERE scope = $4 AND key = $5 AND claim = $6 AND NOT done`,
		rec.Status, string(hb), body, rec.Scope, rec.Key, rec.Claim)
	if err != nil {
		return wrap("finish idempotency key", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("idempotency key claim: %w", store.ErrNotFound)
	}
	return nil
}

// ReleaseIdempotencyKey deletes the in-progress claim.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, scope, key, claim string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2 AND claim = $3 AND NOT done`,
		scope, key, claim); err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// PurgeIdempotencyKeys deletes records expired at now.
func (s *Store) PurgeIdempotencyKeys(ctx context.Context, at time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= $1`, at)
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
