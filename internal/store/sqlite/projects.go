package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// CreateProject inserts p; ErrConflict if its ID or its name in the org is
// taken, or if it is a second default project.
func (s *Store) CreateProject(ctx context.Context, p store.Project) error {
	res, err := s.w.ExecContext(ctx,
		`INSERT INTO projects (id, org_id, name, is_default, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		p.ID, p.OrgID, p.Name, p.Default, formatTime(p.CreatedAt, now()))
	if err != nil {
		return fmt.Errorf("create project %q: %w", p.ID, err)
	}
	return conflictUnlessInserted(res, "project", p.ID)
}

const projectCols = `id, org_id, name, is_default, created_at`

// GetProject returns the project with that ID in orgID; ErrNotFound if
// absent or in another org.
func (s *Store) GetProject(ctx context.Context, orgID, id string) (store.Project, error) {
	return getOne(s.r.QueryRowContext(ctx, `SELECT `+projectCols+` FROM projects WHERE id = ? AND org_id = ?`, id, orgID), dec.Project, "project", id)
}

// DefaultProject returns the org's default project; ErrNotFound if none.
func (s *Store) DefaultProject(ctx context.Context, orgID string) (store.Project, error) {
	p, err := dec.Project(s.r.QueryRowContext(ctx, `SELECT `+projectCols+` FROM projects WHERE org_id = ? AND is_default = 1`, orgID))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Project{}, fmt.Errorf("default project of %q: %w", orgID, store.ErrNotFound)
	}
	if err != nil {
		return store.Project{}, fmt.Errorf("default project of %q: %w", orgID, err)
	}
	return p, nil
}

// ListProjects returns the org's projects, oldest first.
func (s *Store) ListProjects(ctx context.Context, orgID string) ([]store.Project, error) {
	out, err := queryAll(ctx, s.r, dec.Project, `SELECT `+projectCols+` FROM projects WHERE org_id = ? ORDER BY created_at, id`, orgID)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	return out, nil
}

// AssignProject moves the org's sandboxes without a project into projectID.
func (s *Store) AssignProject(ctx context.Context, orgID, projectID string) (int, error) {
	res, err := s.w.ExecContext(ctx, `UPDATE sandboxes SET project_id = ? WHERE org_id = ? AND project_id = ''`, projectID, orgID)
	if err != nil {
		return 0, fmt.Errorf("assign project %q: %w", projectID, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// ListOrgs returns every org, oldest first.
func (s *Store) ListOrgs(ctx context.Context) ([]store.Org, error) {
	out, err := queryAll(ctx, s.r, func(sc scanner) (store.Org, error) {
		var o store.Org
		var created string
		if err := sc.Scan(&o.ID, &o.Name, &created); err != nil {
			return store.Org{}, err
		}
		var err error
		o.CreatedAt, err = parseTime(created)
		return o, err
	}, `SELECT id, name, created_at FROM orgs ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list orgs: %w", err)
	}
	return out, nil
}

// OrgQuotas returns the org's quota overrides.
func (s *Store) OrgQuotas(ctx context.Context, orgID string) (store.OrgQuotas, error) {
	var raw string
	err := s.r.QueryRowContext(ctx, `SELECT quotas FROM orgs WHERE id = ?`, orgID).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
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
	res, err := s.w.ExecContext(ctx, `UPDATE orgs SET quotas = ? WHERE id = ?`, string(b), orgID)
	if err != nil {
		return fmt.Errorf("org %q quotas: %w", orgID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("org %q: %w", orgID, store.ErrNotFound)
	}
	return nil
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
