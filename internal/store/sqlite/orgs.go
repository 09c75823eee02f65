package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// TokenByHash returns the token with that hash; ErrNotFound if none. The
// error does not echo the hash: it is derived from a secret.
func (s *Store) TokenByHash(ctx context.Context, hash string) (store.Token, error) {
	t, gen, ok := s.cache.token(ctx, hash)
	if ok {
		return t, nil
	}
	var role, created string
	err := s.r.QueryRowContext(ctx,
		`SELECT id, org_id, role, hash, created_at, sandbox_id, project_id FROM tokens WHERE hash = ?`, hash).
		Scan(&t.ID, &t.OrgID, &role, &t.Hash, &created, &t.SandboxID, &t.ProjectID)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Token{}, fmt.Errorf("token: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Token{}, fmt.Errorf("get token: %w", err)
	}
	t.Role = store.Role(role)
	if t.CreatedAt, err = parseTime(created); err != nil {
		return store.Token{}, fmt.Errorf("get token %q: %w", t.ID, err)
	}
	s.cache.putToken(gen, t)
	return t, nil
}

// conflictUnlessInserted turns an INSERT … ON CONFLICT DO NOTHING that
// inserted nothing into ErrConflict.
func conflictUnlessInserted(res sql.Result, kind, id string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("create %s %q: %w", kind, id, err)
	}
	if n == 0 {
		return fmt.Errorf("%s %q: already exists: %w", kind, id, store.ErrConflict)
	}
	return nil
}

// DeleteOrg removes the org and its tokens; ErrNotFound if absent.
func (s *Store) DeleteOrg(ctx context.Context, id string) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM orgs WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("delete org %q: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("org %q: %w", id, store.ErrNotFound)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM tokens WHERE org_id = ?`, id); err != nil {
			return fmt.Errorf("delete org %q: tokens: %w", id, err)
		}
		return nil
	})
}

// OrgUsage sums the org's sandboxes in any of states.
func (s *Store) OrgUsage(ctx context.Context, orgID string, states ...sandbox.State) (store.Usage, error) {
	if len(states) == 0 {
		return store.Usage{}, nil
	}
	args := []any{orgID}
	for _, st := range states {
		args = append(args, string(st))
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(states)), ",")
	var u store.Usage
	err := s.r.QueryRowContext(ctx,
		`SELECT count(*), coalesce(sum(cpu), 0), coalesce(sum(ram_mb), 0) FROM sandboxes WHERE org_id = ? AND state IN (`+marks+`)`, args...).
		Scan(&u.Sandboxes, &u.CPU, &u.RAMMB)
	if err != nil {
		return store.Usage{}, fmt.Errorf("org %q usage: %w", orgID, err)
	}
	return u, nil
}
