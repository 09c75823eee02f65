// Package idemkeys is the part of store.IdempotencyStore that is the same
// in both SQL stores: reading, finishing, releasing and purging keys. Each
// store keeps ClaimIdempotencyKey, whose locking differs (SQLite's one
// write transaction, PostgreSQL's row locks and insert races).
package idemkeys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

// Cols are idempotency_keys' columns as rowscan.Decoder.Idempotency reads
// them.
const Cols = `scope, key, request_hash, claim, done, status, header, body, created_at, locked_until, expires_at`

// Keys implements all of store.IdempotencyStore but ClaimIdempotencyKey
// on db; the SQL stores embed it.
type Keys struct {
	db sqldb.DB
}

// New returns the keys on db.
func New(db sqldb.DB) *Keys { return &Keys{db: db} }

// GetIdempotencyKey returns the record; ErrNotFound if absent.
func (k *Keys) GetIdempotencyKey(ctx context.Context, scope, key string) (store.IdempotencyRecord, error) {
	rec, err := k.db.Decoder().Idempotency(k.db.QueryRow(ctx,
		`SELECT `+Cols+` FROM idempotency_keys WHERE scope = ? AND key = ?`, scope, key))
	if errors.Is(err, k.db.NoRows()) {
		return store.IdempotencyRecord{}, fmt.Errorf("idempotency key: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.IdempotencyRecord{}, fmt.Errorf("get idempotency key: %w", err)
	}
	return rec, nil
}

// FinishIdempotencyKey stores the answer of the claim rec.Claim.
func (k *Keys) FinishIdempotencyKey(ctx context.Context, rec store.IdempotencyRecord) error {
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
	n, err := k.db.Exec(ctx, `UPDATE idempotency_keys SET done = true, status = ?, header = ?, body = ?
		WHERE scope = ? AND key = ? AND claim = ? AND NOT done`,
		rec.Status, string(hb), body, rec.Scope, rec.Key, rec.Claim)
	if err != nil {
		return k.db.Err("finish idempotency key", err)
	}
	return sqldb.Found(n, "idempotency key claim")
}

// ReleaseIdempotencyKey deletes the in-progress claim.
func (k *Keys) ReleaseIdempotencyKey(ctx context.Context, scope, key, claim string) error {
	if _, err := k.db.Exec(ctx, `DELETE FROM idempotency_keys WHERE scope = ? AND key = ? AND claim = ? AND NOT done`,
		scope, key, claim); err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// PurgeIdempotencyKeys deletes records expired at at.
func (k *Keys) PurgeIdempotencyKeys(ctx context.Context, at time.Time) (int, error) {
	n, err := k.db.Exec(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= ?`, k.db.Time(at))
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	return int(n), nil
}
