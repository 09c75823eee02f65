// This file is the part of the org, token and project stores that is
// the same in both SQL stores: single statements on orgs, tokens and
// projects, and org quotas. Each store keeps what it does its own way:
// TokenByHash (SQLite answers from its read cache), OrgUsage (the dialects
// spell "state in a list" differently) and DeleteOrg (its transaction).

package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/internal/sqldb"
)

// insert runs an INSERT … ON CONFLICT DO NOTHING of the kind named id;
// ErrConflict if it inserted nothing.
func (s *Store) insert(ctx context.Context, kind, id, query string, args ...any) error {
	n, err := s.db.Exec(ctx, query, args...)
	if err != nil {
		return s.db.Err(fmt.Sprintf("create %s %q", kind, id), err)
	}
	return sqldb.Inserted(n, kind, id)
}

// CreateOrg inserts o; ErrConflict if its ID exists. A zero CreatedAt means now.
func (s *Store) CreateOrg(ctx context.Context, o store.Org) error {
	return s.insert(ctx, "org", o.ID, `INSERT INTO orgs (id, name, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
		o.ID, o.Name, s.db.Time(sqldb.Or(o.CreatedAt, sqldb.Now())))
}

// GetOrg returns the org with that ID; ErrNotFound if absent.
func (s *Store) GetOrg(ctx context.Context, id string) (store.Org, error) {
	return sqldb.One(ctx, s.db, s.db.Decoder().Org, "org", id, `SELECT id, name, created_at FROM orgs WHERE id = ?`, id)
}

// ListOrgs returns every org, oldest first.
func (s *Store) ListOrgs(ctx context.Context) ([]store.Org, error) {
	return sqldb.List(ctx, s.db, s.db.Decoder().Org, "list orgs", `SELECT id, name, created_at FROM orgs ORDER BY created_at, id`)
}

// CreateToken inserts t; ErrConflict if its ID or hash exists.
func (s *Store) CreateToken(ctx context.Context, t store.Token) error {
	return s.insert(ctx, "token", t.ID, `INSERT INTO tokens (id, org_id, role, hash, created_at, sandbox_id, project_id)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		t.ID, t.OrgID, string(t.Role), t.Hash, s.db.Time(sqldb.Or(t.CreatedAt, sqldb.Now())), t.SandboxID, t.ProjectID)
}

// OrgQuotas returns the org's quota overrides.
func (s *Store) OrgQuotas(ctx context.Context, orgID string) (store.OrgQuotas, error) {
	var raw string
	err := s.db.QueryRow(ctx, `SELECT quotas FROM orgs WHERE id = ?`, orgID).Scan(&raw)
	if errors.Is(err, s.db.NoRows()) {
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
	n, err := s.db.Exec(ctx, `UPDATE orgs SET quotas = ? WHERE id = ?`, string(b), orgID)
	if err != nil {
		return fmt.Errorf("org %q quotas: %w", orgID, err)
	}
	return sqldb.Found(n, fmt.Sprintf("org %q", orgID))
}

const projectCols = `id, org_id, name, is_default, created_at`

// CreateProject inserts p; ErrConflict if its ID or its name in the org is
// taken, or if it is a second default project.
func (s *Store) CreateProject(ctx context.Context, p store.Project) error {
	return s.insert(ctx, "project", p.ID, `INSERT INTO projects (`+projectCols+`) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		p.ID, p.OrgID, p.Name, p.Default, s.db.Time(sqldb.Or(p.CreatedAt, sqldb.Now())))
}

// GetProject returns the project with that ID in orgID; ErrNotFound if
// absent or in another org.
func (s *Store) GetProject(ctx context.Context, orgID, id string) (store.Project, error) {
	return sqldb.One(ctx, s.db, s.db.Decoder().Project, "project", id,
		`SELECT `+projectCols+` FROM projects WHERE id = ? AND org_id = ?`, id, orgID)
}

// DefaultProject returns the org's default project; ErrNotFound if none.
func (s *Store) DefaultProject(ctx context.Context, orgID string) (store.Project, error) {
	p, err := s.db.Decoder().Project(s.db.QueryRow(ctx,
		`SELECT `+projectCols+` FROM projects WHERE org_id = ? AND is_default`, orgID))
	if errors.Is(err, s.db.NoRows()) {
		return store.Project{}, fmt.Errorf("default project of %q: %w", orgID, store.ErrNotFound)
	}
	if err != nil {
		return store.Project{}, fmt.Errorf("default project of %q: %w", orgID, err)
	}
	return p, nil
}

// ListProjects returns the org's projects, oldest first.
func (s *Store) ListProjects(ctx context.Context, orgID string) ([]store.Project, error) {
	return sqldb.List(ctx, s.db, s.db.Decoder().Project, "list projects",
		`SELECT `+projectCols+` FROM projects WHERE org_id = ? ORDER BY created_at, id`, orgID)
}

// AssignProject moves the org's sandboxes without a project into projectID.
func (s *Store) AssignProject(ctx context.Context, orgID, projectID string) (int, error) {
	n, err := s.db.Exec(ctx, `UPDATE sandboxes SET project_id = ? WHERE org_id = ? AND project_id = ''`, projectID, orgID)
	if err != nil {
		return 0, s.db.Err(fmt.Sprintf("assign project %q", projectID), err)
	}
	return int(n), nil
}
