package store

import (
	"context"
	"time"
)

// IdempotencyRecord is one Idempotency-Key: the request it was first used
// with and, once that request finished, its answer.
type IdempotencyRecord struct {
	// Scope is whose key it is (the token that sent it): the same key from
	// two principals names two records.
	Scope string
	Key   string
	// RequestHash identifies the request (method, path, query, canonical
	// body); a retry with another hash is a reuse of the key.
	RequestHash string
	// Claim is a nonce of the request holding an in-progress record, so a
	// claimant whose lock ran out cannot finish a newer claim.
	Claim string
	// Done is false while the first request runs.
	Done   bool
	Status int
	Header map[string][]string
	Body   []byte

	CreatedAt time.Time
	// LockedUntil is when an in-progress claim is considered abandoned
	// (its process died) and may be claimed again.
	LockedUntil time.Time
	// ExpiresAt is when the record stops answering retries.
	ExpiresAt time.Time
}

// IdempotencyStore remembers idempotency keys. Store embeds it.
type IdempotencyStore interface {
	// ClaimIdempotencyKey inserts rec (in progress) unless a record holds
	// (rec.Scope, rec.Key) that is neither expired nor an in-progress claim
	// past its LockedUntil (both are replaced). It returns the holding
	// record with claimed false, or rec with claimed true. now decides
	// expiry.
	ClaimIdempotencyKey(ctx context.Context, rec IdempotencyRecord, now time.Time) (held IdempotencyRecord, claimed bool, err error)
	// GetIdempotencyKey returns the record; ErrNotFound if absent.
	GetIdempotencyKey(ctx context.Context, scope, key string) (IdempotencyRecord, error)
	// FinishIdempotencyKey stores the answer (Status, Header, Body) of the
	// in-progress record claimed with rec.Claim and marks it done;
	// ErrNotFound if that claim no longer holds the key.
	FinishIdempotencyKey(ctx context.Context, rec IdempotencyRecord) error
	// ReleaseIdempotencyKey deletes the in-progress record claimed with
	// claim (a request whose answer is not kept, so a retry runs again).
	// Releasing a claim that no longer holds the key is a no-op.
	ReleaseIdempotencyKey(ctx context.Context, scope, key, claim string) error
	// PurgeIdempotencyKeys deletes records expired at now and reports how
	// many.
	PurgeIdempotencyKeys(ctx context.Context, now time.Time) (int, error)
}
