package tenancy

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// DefaultProjectName is the name of the project every org gets, where
// sandboxes go when a create names no project.
const DefaultProjectName = "default"

var projectNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$`)

// DefaultProject returns the org's default project, creating it on first
// use: orgs made before projects existed (or by paths that do not know
// about projects) get one the first time they need it.
func (s *Service) DefaultProject(ctx context.Context, orgID string) (store.Project, error) {
	for range 2 {
		p, err := s.store.DefaultProject(ctx, orgID)
		if !errors.Is(err, store.ErrNotFound) {
			return p, err
		}
		p = store.Project{ID: sandbox.NewID(sandbox.PrefixProject), OrgID: orgID, Name: DefaultProjectName, Default: true, CreatedAt: time.Now().UTC()}
		err = s.store.CreateProject(ctx, p)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return store.Project{}, err
		}
		// Another writer made it (or took the name): read again.
	}
	return store.Project{}, fmt.Errorf("default project of %q: the name %q is taken by a project that is not the default: %w", orgID, DefaultProjectName, sandbox.ErrConflict)
}

// ensureDefaultProjects gives every org its default project and moves
// sandboxes that predate projects into it. ptd runs it at start-up.
func (s *Service) ensureDefaultProjects(ctx context.Context) error {
	orgs, err := s.store.ListOrgs(ctx)
	if err != nil {
		return fmt.Errorf("default projects: %w", err)
	}
	for _, o := range orgs {
		p, err := s.DefaultProject(ctx, o.ID)
		if err != nil {
			return fmt.Errorf("default projects: %w", err)
		}
		n, err := s.store.AssignProject(ctx, o.ID, p.ID)
		if err != nil {
			return fmt.Errorf("default projects: %w", err)
		}
		if n > 0 {
			s.log.InfoContext(ctx, "sandboxes moved into the default project", "org", o.ID, "project", p.ID, "count", n)
		}
	}
	return nil
}

// requireOrgAdmin refuses members, sandbox tokens and project tokens:
// managing projects, tokens and quotas is for an org's unscoped admins.
func requireOrgAdmin(p Principal, what string) error {
	if p.Role != store.RoleAdmin || p.SandboxID != "" || p.ProjectID != "" {
		return fmt.Errorf("%s needs an org admin token (this token is %s): %w", what, describe(p), sandbox.ErrForbidden)
	}
	return nil
}

// describe names a principal's kind for error messages.
func describe(p Principal) string {
	switch {
	case p.SandboxID != "":
		return "scoped to sandbox " + p.SandboxID
	case p.ProjectID != "":
		return "scoped to project " + p.ProjectID
	}
	return "a " + string(p.Role) + " token"
}

// CreateProject makes a project in p's org. Org admins only; names are
// unique per org.
func (s *Service) CreateProject(ctx context.Context, p Principal, name string) (store.Project, error) {
	if err := requireOrgAdmin(p, "creating projects"); err != nil {
		return store.Project{}, err
	}
	if !projectNameRE.MatchString(name) {
		return store.Project{}, &sandbox.FieldError{Field: "name", Reason: "must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"}
	}
	if _, err := s.DefaultProject(ctx, p.OrgID); err != nil {
		return store.Project{}, err
	}
	pr := store.Project{ID: sandbox.NewID(sandbox.PrefixProject), OrgID: p.OrgID, Name: name, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := s.store.CreateProject(ctx, pr); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return store.Project{}, fmt.Errorf("project name %q is taken in this org: %w", name, sandbox.ErrConflict)
		}
		return store.Project{}, err
	}
	return pr, nil
}

// ListProjects lists the projects p may see: all of the org's, or only
// its own for a project token.
func (s *Service) ListProjects(ctx context.Context, p Principal) ([]store.Project, error) {
	if _, err := s.DefaultProject(ctx, p.OrgID); err != nil {
		return nil, err
	}
	all, err := s.store.ListProjects(ctx, p.OrgID)
	if err != nil {
		return nil, err
	}
	if p.ProjectID == "" {
		return all, nil
	}
	out := []store.Project{}
	for _, pr := range all {
		if pr.ID == p.ProjectID {
			out = append(out, pr)
		}
	}
	return out, nil
}

// GetProject returns one project of p's org; another org's, or another
// project than a project token's own, is not found.
func (s *Service) GetProject(ctx context.Context, p Principal, id string) (store.Project, error) {
	if !sandbox.ValidID(sandbox.PrefixProject, id) || (p.ProjectID != "" && id != p.ProjectID) {
		return store.Project{}, fmt.Errorf("project %q: %w", id, sandbox.ErrNotFound)
	}
	return s.store.GetProject(ctx, p.OrgID, id)
}

// ProjectFor resolves the project a create goes to: the request's
// (which must exist in the org and, for a project token, be its own), the
// parent's for a child, else the org's default project.
func (s *Service) ProjectFor(ctx context.Context, p Principal, requested, parentProject string) (string, error) {
	switch {
	case p.ProjectID != "":
		if requested != "" && requested != p.ProjectID {
			return "", fmt.Errorf("project %q: %w", requested, &sandbox.NotFoundFieldError{Name: "project_id"})
		}
		return p.ProjectID, nil
	case requested != "":
		if !sandbox.ValidID(sandbox.PrefixProject, requested) {
			return "", fmt.Errorf("project %q: %w", requested, &sandbox.NotFoundFieldError{Name: "project_id"})
		}
		if _, err := s.store.GetProject(ctx, p.OrgID, requested); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return "", fmt.Errorf("project %q: %w", requested, &sandbox.NotFoundFieldError{Name: "project_id"})
			}
			return "", err
		}
		return requested, nil
	case parentProject != "":
		return parentProject, nil
	}
	def, err := s.DefaultProject(ctx, p.OrgID)
	if err != nil {
		return "", err
	}
	return def.ID, nil
}

// TokenRequest is a new API token of the caller's org.
type TokenRequest struct {
	// Role is member (the default) or admin; a project token is always a
	// member.
	Role store.Role
	// ProjectID scopes the token to one project of the org.
	ProjectID string
}

// CreateToken issues a new token of p's org and returns the record and
// the secret (shown once). Org admins only.
func (s *Service) CreateToken(ctx context.Context, p Principal, r TokenRequest) (store.Token, string, error) {
	if err := requireOrgAdmin(p, "creating tokens"); err != nil {
		return store.Token{}, "", err
	}
	if r.Role == "" {
		r.Role = store.RoleMember
	}
	if r.Role != store.RoleMember && r.Role != store.RoleAdmin {
		return store.Token{}, "", &sandbox.FieldError{Field: "role", Reason: "must be member or admin"}
	}
	if r.ProjectID != "" {
		if r.Role == store.RoleAdmin {
			return store.Token{}, "", &sandbox.FieldError{Field: "role", Reason: "a project token is a member token; org admin tokens are not scoped"}
		}
		if _, err := s.GetProject(ctx, p, r.ProjectID); err != nil {
			return store.Token{}, "", fmt.Errorf("project %q: %w", r.ProjectID, &sandbox.NotFoundFieldError{Name: "project_id"})
		}
	}
	secret := NewToken()
	t := store.Token{ID: sandbox.NewID(sandbox.PrefixToken), OrgID: p.OrgID, Role: r.Role, Hash: HashToken(secret),
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond), ProjectID: r.ProjectID}
	if err := s.store.CreateToken(ctx, t); err != nil {
		return store.Token{}, "", err
	}
	return t, secret, nil
}
