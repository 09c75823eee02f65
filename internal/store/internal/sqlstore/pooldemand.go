// This file is the warm pools' demand (store.PoolDemandStore), the same
// in both SQL stores. ClaimPoolSandbox writes a claim in its own
// transaction with each store's PoolClaimInsert.

package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

// PoolClaimInsert inserts one pool claim: id, template, runtime,
// claimed_at, warm, handing_over (? placeholders).
const PoolClaimInsert = `INSERT INTO pool_claims (id, template, runtime, claimed_at, warm, handing_over)
	VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`

// AddPoolClaim records c; ErrConflict if its ID exists.
func (s *Store) AddPoolClaim(ctx context.Context, c store.PoolClaim) error {
	n, err := s.db.Exec(ctx, PoolClaimInsert, c.ID, c.Template, c.Runtime, s.db.Time(sqldb.Stored(c.At)), c.Warm, c.HandingOver)
	if err != nil {
		return s.db.Err(fmt.Sprintf("add pool claim %q", c.ID), err)
	}
	return sqldb.Inserted(n, "pool claim", c.ID)
}

// EndPoolHandOver marks the claim's hand-over done (nothing if absent).
func (s *Store) EndPoolHandOver(ctx context.Context, id string) error {
	return sqldb.Write(ctx, s.db, fmt.Sprintf("end pool hand-over %q", id),
		`UPDATE pool_claims SET handing_over = ? WHERE id = ? AND handing_over = ?`, false, id, true)
}

// PoolClaims returns the claims q selects, by pool and oldest first. The
// pool loop reads them every pass: the claimed_at index bounds the scan to
// the claims since q.Since.
func (s *Store) PoolClaims(ctx context.Context, q store.PoolClaimQuery) ([]store.PoolClaim, error) {
	const cols = `id, template, runtime, claimed_at, warm, handing_over`
	where := `claimed_at >= ?`
	args := []any{s.db.Time(q.Since)}
	if len(q.Templates) > 0 {
		cond, targs := s.db.AnyOf("template", q.Templates)
		where += ` AND ` + cond
		args = append(args, targs...)
	}
	if q.HandingOver {
		where += ` AND handing_over = ?`
		args = append(args, true)
	}
	query := `SELECT ` + cols + ` FROM pool_claims WHERE ` + where
	if q.PerPool > 0 {
		query = `SELECT ` + cols + ` FROM (SELECT ` + cols + `,
				ROW_NUMBER() OVER (PARTITION BY template, runtime ORDER BY claimed_at DESC, id DESC) AS newest
			FROM pool_claims WHERE ` + where + `) AS recent WHERE newest <= ?`
		args = append(args, q.PerPool)
	}
	return sqldb.List(ctx, s.db, s.db.Decoder().PoolClaim, "list pool claims", query+` ORDER BY template, runtime, claimed_at, id`, args...)
}

// PrunePoolClaims deletes the claims before before.
func (s *Store) PrunePoolClaims(ctx context.Context, before time.Time) (int64, error) {
	n, err := s.db.Exec(ctx, `DELETE FROM pool_claims WHERE claimed_at < ?`, s.db.Time(before))
	if err != nil {
		return 0, fmt.Errorf("prune pool claims: %w", err)
	}
	return n, nil
}

// AddPoolBoot records b, then drops its pool's boots beyond the keep
// newest. The two writes need not be one transaction: a reader between
// them sees one boot more, and PoolBoots readers average what they get.
func (s *Store) AddPoolBoot(ctx context.Context, b store.PoolBoot, keep int) error {
	what := fmt.Sprintf("add pool boot of %q", store.PoolKey(b.Template, b.Runtime))
	if err := sqldb.Write(ctx, s.db, what, `INSERT INTO pool_boots (template, runtime, booted_at, took_us) VALUES (?, ?, ?, ?)`,
		b.Template, b.Runtime, s.db.Time(sqldb.Stored(b.At)), b.Took.Microseconds()); err != nil {
		return err
	}
	if keep <= 0 {
		return nil
	}
	return sqldb.Write(ctx, s.db, what, `DELETE FROM pool_boots WHERE template = ? AND runtime = ? AND id NOT IN
		(SELECT id FROM pool_boots WHERE template = ? AND runtime = ? ORDER BY booted_at DESC, id DESC LIMIT ?)`,
		b.Template, b.Runtime, b.Template, b.Runtime, keep)
}

// PoolBoots returns the recorded boots by pool, oldest first.
func (s *Store) PoolBoots(ctx context.Context) ([]store.PoolBoot, error) {
	return sqldb.List(ctx, s.db, s.db.Decoder().PoolBoot, "list pool boots",
		`SELECT template, runtime, booted_at, took_us FROM pool_boots ORDER BY template, runtime, booted_at, id`)
}
