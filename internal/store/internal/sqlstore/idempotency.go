// This file is the part of store.IdempotencyStore that is the same
// in both SQL stores: reading, finishing, releasing and purging keys. Each
// store keeps ClaimIdempotencyKey, whose locking differs (SQLite's one
// write transaction, PostgreSQL's row locks and insert races).

package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

// IdemCols are idempotency_keys' columns as rowscan.Decoder.Idempotency reads
// them.
const IdemCols = `scope, key, request_hash, claim, done, status, header, body, created_at, locked_until, expires_at`

// GetIdempotencyKey returns the record; ErrNotFound if absent.
func (s *Store) GetIdempotencyKey(ctx context.Context, scope, key string) (store.IdempotencyRecord, error) {
	rec, err := s.db.Decoder().Idempotency(s.db.QueryRow(ctx,
		`SELECT `+IdemCols+` FROM idempotency_keys WHERE scope = ? AND key = ?`, scope, key))
	if errors.Is(err, s.db.NoRows()) {
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
	n, err := s.db.Exec(ctx, `UPDATE idempotency_keys SET done = true, status = ?, header = ?, body = ?
		WHERE scope = ? AND key = ? AND claim = ? AND NOT done`,
		rec.Status, string(hb), body, rec.Scope, rec.Key, rec.Claim)
	if err != nil {
		return s.db.Err("finish idempotency key", err)
	}
	return sqldb.Found(n, "idempotency key claim")
}

// ReleaseIdempotencyKey deletes the in-progress claim.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, scope, key, claim string) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM idempotency_keys WHERE scope = ? AND key = ? AND claim = ? AND NOT done`,
		scope, key, claim); err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// PurgeIdempotencyKeys deletes records expired at at.
func (s *Store) PurgeIdempotencyKeys(ctx context.Context, at time.Time) (int, error) {
	n, err := s.db.Exec(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= ?`, s.db.Time(at))
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	return int(n), nil
}
