package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/store"
)

const projectCols = `id, org_id, name, is_default, created_at`

// CreateProject inserts p; ErrConflict if its ID or its name in the org is
// taken, or if it is a second default project.
func (s *Store) CreateProject(ctx context.Context, p store.Project) error {
	tag, err := s.pool.Exec(ctx, `INSERT INTO projects (`+projectCols+`) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
		p.ID, p.OrgID, p.Name, p.Default, ts(p.CreatedAt, now()))
	if err != nil {
		return wrap(fmt.Sprintf("create project %q", p.ID), err)
	}
	return conflictUnlessInserted(tag, "project", p.ID)
}

// GetProject returns the project with that ID in orgID; ErrNotFound if
// absent or in another org.
func (s *Store) GetProject(ctx context.Context, orgID, id string) (store.Project, error) {
	return getOne(s.pool.QueryRow(ctx, `SELECT `+projectCols+` FROM projects WHERE id = $1 AND org_id = $2`, id, orgID),
		dec.Project, "project", id)
}

// DefaultProject returns the org's default project; ErrNotFound if none.
func (s *Store) DefaultProject(ctx context.Context, orgID string) (store.Project, error) {
	p, err := dec.Project(s.pool.QueryRow(ctx, `SELECT `+projectCols+` FROM projects WHERE org_id = $1 AND is_default`, orgID))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Project{}, fmt.Errorf("default project of %q: %w", orgID, store.ErrNotFound)
	}
	if err != nil {
		return store.Project{}, fmt.Errorf("default project of %q: %w", orgID, err)
	}
	return p, nil
}

// ListProjects returns the org's projects, oldest first.
func (s *Store) ListProjects(ctx context.Context, orgID string) ([]store.Project, error) {
	out, err := queryAll(ctx, s.pool, dec.Project, `SELECT `+projectCols+` FROM projects WHERE org_id = $1 ORDER BY created_at, id`, orgID)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	return out, nil
}

// AssignProject moves the org's sandboxes without a project into projectID.
func (s *Store) AssignProject(ctx context.Context, orgID, projectID string) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE sandboxes SET project_id = $1 WHERE org_id = $2 AND project_id = ''`, projectID, orgID)
	if err != nil {
		return 0, wrap(fmt.Sprintf("assign project %q", projectID), err)
	}
	return int(tag.RowsAffected()), nil
}
