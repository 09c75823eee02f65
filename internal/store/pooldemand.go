package store

import (
	"context"
	"time"
)

// PoolClaim is one claim of a warm pool that counts as its demand: what
// an auto pool sizes its target from (docs/sessions.md, "Demand-sized
// pools"). Claims live in the store, not in a ptd's memory, so that every
// ptd sharing it sees the claims made through the others and a restart
// keeps them.
type PoolClaim struct {
	// ID keys the claim: a session's claim has its session's ID.
	ID string
	// Template and Runtime name the pool, as Pool does (Runtime "" is
	// the default class).
	Template string
	Runtime  string
	// At is when the claim was made; zero on insert means now.
	At time.Time
	// Warm is true when the pool served the claim, false when it had
	// none ready and the create booted cold.
	Warm bool
	// HandingOver is true while the claim's hand-over still runs (a
	// session's workspace restore): the refill waits for it
	// (EndPoolHandOver ends it).
	HandingOver bool
}

// PoolClaimQuery selects pool claims: those made at or after Since, and
// of those, the ones the other fields name.
type PoolClaimQuery struct {
	Since time.Time
	// Templates, when not empty, keeps the claims of these templates'
	// pools (any runtime class).
	Templates []string
	// HandingOver keeps only the claims whose hand-over still runs.
	HandingOver bool
	// PerPool, when above 0, keeps only each pool's newest PerPool.
	PerPool int
}

// PoolBoot is one pooled sandbox's boot: how long it took from its create
// to claimable. A pool's refill time is the mean of its recent boots.
type PoolBoot struct {
	// Template and Runtime name the pool, as Pool does.
	Template string
	Runtime  string
	// At is when the sandbox became claimable; zero on insert means now.
	At time.Time
	// Took is stored to the microsecond.
	Took time.Duration
}

// PoolDemandStore holds the warm pools' demand: recent claims and boots.
// Store embeds it. ClaimPoolSandbox records its claim here too.
type PoolDemandStore interface {
	// AddPoolClaim records c; ErrConflict if a claim with its ID exists.
	AddPoolClaim(ctx context.Context, c PoolClaim) error
	// EndPoolHandOver marks the claim's hand-over done. A claim that is
	// absent (pruned, or never recorded) or already done is not an
	// error.
	EndPoolHandOver(ctx context.Context, id string) error
	// PoolClaims returns the claims q selects, by pool (template, then
	// runtime) and oldest first within one.
	PoolClaims(ctx context.Context, q PoolClaimQuery) ([]PoolClaim, error)
	// PrunePoolClaims deletes the claims made before before and returns
	// how many it deleted.
	PrunePoolClaims(ctx context.Context, before time.Time) (int64, error)
	// AddPoolBoot records b and keeps only the keep newest boots of its
	// pool (by At; keep <= 0: all).
	AddPoolBoot(ctx context.Context, b PoolBoot, keep int) error
	// PoolBoots returns the recorded boots, by pool (template, then
	// runtime) and oldest first within one.
	PoolBoots(ctx context.Context) ([]PoolBoot, error)
}
