package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// CreateOrg inserts o; ErrConflict if its ID exists. A zero CreatedAt means now.
func (s *Store) CreateOrg(ctx context.Context, o store.Org) error {
	tag, err := s.pool.Exec(ctx, `INSERT INTO orgs (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		o.ID, o.Name, ts(o.CreatedAt, now()))
	if err != nil {
		return wrap(fmt.Sprintf("create org %q", o.ID), err)
	}
	return conflictUnlessInserted(tag, "org", o.ID)
}

// GetOrg returns the org with that ID; ErrNotFound if absent.
func (s *Store) GetOrg(ctx context.Context, id string) (store.Org, error) {
	return getOne(s.pool.QueryRow(ctx, `SELECT id, name, created_at FROM orgs WHERE id = $1`, id), dec.Org, "org", id)
}

// ListOrgs returns every org, oldest first.
func (s *Store) ListOrgs(ctx context.Context) ([]store.Org, error) {
	out, err := queryAll(ctx, s.pool, dec.Org, `SELECT id, name, created_at FROM orgs ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list orgs: %w", err)
	}
	return out, nil
}

// CreateToken inserts t; ErrConflict if its ID or hash exists.
func (s *Store) CreateToken(ctx context.Context, t store.Token) error {
	tag, err := s.pool.Exec(ctx, `INSERT INTO tokens (id, org_id, role, hash, created_at, sandbox_id, project_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
		t.ID, t.OrgID, string(t.Role), t.Hash, ts(t.CreatedAt, now()), t.SandboxID, t.ProjectID)
	if err != nil {
		return wrap(fmt.Sprintf("create token %q", t.ID), err)
	}
	return conflictUnlessInserted(tag, "token", t.ID)
}

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

// OrgQuotas returns the org's quota overrides.
func (s *Store) OrgQuotas(ctx context.Context, orgID string) (store.OrgQuotas, error) {
	var raw string
	err := s.pool.QueryRow(ctx, `SELECT quotas FROM orgs WHERE id = $1`, orgID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.OrgQuotas{}, fmt.Errorf("org %q: %w", orgID, store.ErrNotFound)
	}
	if err != nil {
		return store.OrgQuotas{}, fmt.Errorf("org %q quotas: %w", orgID, err)
	}
	var q store.OrgQuotas
	if err := json.Unmarshal([]byte(raw), &q); err != nil {
		return store.OrgQuotas{}, fmt.Errorf("org %q quotas: %w", orgID, err)
	}
	return q, nil
}

// SetOrgQuotas replaces the org's quota overrides.
func (s *Store) SetOrgQuotas(ctx context.Context, orgID string, q store.OrgQuotas) error {
	b, err := json.Marshal(q)
	if err != nil {
		return fmt.Errorf("org %q quotas: %w", orgID, err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE orgs SET quotas = $1 WHERE id = $2`, string(b), orgID)
	if err != nil {
		return fmt.Errorf("org %q quotas: %w", orgID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("org %q: %w", orgID, store.ErrNotFound)
	}
	return nil
}

// OrgUsage sums the org's sandboxes in any of states.
func (s *Store) OrgUsage(ctx context.Context, orgID string, states ...sandbox.State) (store.Usage, error) {
	if len(states) == 0 {
		return store.Usage{}, nil
	}
	var u store.Usage
	err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(cpu), 0), coalesce(sum(ram_mb), 0)::bigint
		FROM sandboxes WHERE org_id = $1 AND state = ANY($2)`, orgID, stateStrings(states)).
		Scan(&u.Sandboxes, &u.CPU, &u.RAMMB)
	if err != nil {
		return store.Usage{}, fmt.Errorf("org %q usage: %w", orgID, err)
	}
	return u, nil
}

func stateStrings(states []sandbox.State) []string {
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = string(st)
	}
	return out
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
