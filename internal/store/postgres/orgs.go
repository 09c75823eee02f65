package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

// TokenByHash returns the token with that hash; ErrNotFound if none. The
// error does not echo the hash: it is derived from a secret.
func (s *Store) TokenByHash(ctx context.Context, hash string) (store.Token, error) {
	var t store.Token
	var role string
	err := s.pool.QueryRow(ctx, `SELECT id, org_id, role, hash, created_at, sandbox_id, project_id FROM tokens WHERE hash = $1`, hash).
		Scan(&t.ID, &t.OrgID, &role, &t.Hash, &t.CreatedAt, &t.SandboxID, &t.ProjectID)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Token{}, fmt.Errorf("token: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Token{}, wrap("get token", err)
	}
	t.Role = store.Role(role)
	return t, nil
}

// OrgUsage sums the org's sandboxes in any of states.
func (s *Store) OrgUsage(ctx context.Context, orgID string, states ...sandbox.State) (store.Usage, error) {
	if len(states) == 0 {
		return store.Usage{}, nil
	}
	var u store.Usage
	err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(cpu), 0), coalesce(sum(ram_mb), 0)::bigint
		FROM sandboxes WHERE org_id = $1 AND state = ANY($2)`, orgID, sqldb.Strings(states)).
		Scan(&u.Sandboxes, &u.CPU, &u.RAMMB)
	if err != nil {
		return store.Usage{}, fmt.Errorf("org %q usage: %w", orgID, err)
	}
	return u, nil
}

// DeleteOrg removes the org and its tokens; ErrNotFound if absent.
func (s *Store) DeleteOrg(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM orgs WHERE id = $1`, id)
		if err != nil {
			return wrap(fmt.Sprintf("delete org %q", id), err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("org %q: %w", id, store.ErrNotFound)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM tokens WHERE org_id = $1`, id); err != nil {
			return wrap(fmt.Sprintf("delete org %q: tokens", id), err)
		}
		return nil
	})
}
