package platinum

import (
	"context"
	"fmt"
	"net/url"
	"time"
)

// Project groups an organization's sandboxes. Every organization has a
// default project, where sandboxes go when a create names none.
type Project struct {
	ID        string    `json:"id"` // prj_…
	OrgID     string    `json:"org_id"`
	Name      string    `json:"name"`
	Default   bool      `json:"default"`
	CreatedAt time.Time `json:"created_at"`
}

// ProjectsService groups the project calls. Get it from Client.Projects.
type ProjectsService struct {
	c *Client
}

// Create makes a project. It needs an org admin token (others get an
// APIError with code forbidden); names are unique in an org (conflict).
func (s *ProjectsService) Create(ctx context.Context, name string) (*Project, error) {
	return fetchJSON[Project](ctx, s.c, "POST", "/v1/projects", nil, map[string]string{"name": name}, "create project %q", name)
}

// List returns the projects the token may see (all of the org's, or its
// own for a project token), oldest first.
func (s *ProjectsService) List(ctx context.Context) ([]Project, error) {
	return fetchRows[Project](ctx, s.c, "GET", "/v1/projects", nil, nil, "list projects")
}

// Get returns one project; another org's (or, for a project token,
// another project) is an APIError with code not_found.
func (s *ProjectsService) Get(ctx context.Context, id string) (*Project, error) {
	return fetchJSON[Project](ctx, s.c, "GET", "/v1/projects/"+url.PathEscape(id), nil, nil, "get project %s", id)
}

// Token is an API token's record; the secret is returned once, by Create.
type Token struct {
	ID        string    `json:"id"`
	OrgID     string    `json:"org_id"`
	Role      string    `json:"role"`
	ProjectID string    `json:"project_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// CreateTokenRequest describes a new token of the caller's organization.
type CreateTokenRequest struct {
	// Role is member (the default) or admin.
	Role string `json:"role,omitempty"`
	// ProjectID scopes the token to one project: it sees and creates
	// sandboxes only there (a project token is a member token).
	ProjectID string `json:"project_id,omitempty"`
}

// TokensService groups the token calls. Get it from Client.Tokens.
type TokensService struct {
	c *Client
}

// Create issues a token and returns its record and secret ("pt_…", shown
// only this once). It needs an org admin token.
func (s *TokensService) Create(ctx context.Context, req CreateTokenRequest) (*Token, string, error) {
	var out struct {
		Token
		Secret string `json:"token"`
	}
	if _, err := s.c.doJSON(ctx, "POST", "/v1/tokens", nil, req, &out); err != nil {
		return nil, "", fmt.Errorf("create token: %w", err)
	}
	return &out.Token, out.Secret, nil
}

// OrgQuota is an organization's limits on active sandboxes (creating,
// starting, running, …: stopped ones do not count) and what it uses.
type OrgQuota struct {
	OrgID  string `json:"org_id"`
	Limits struct {
		MaxSandboxes int     `json:"max_sandboxes"`
		MaxCPU       float64 `json:"max_cpu"`
		MaxRAMMB     int     `json:"max_ram_mb"`
	} `json:"limits"`
	// Overrides are the org's own settings; nil fields follow the server.
	Overrides QuotaOverrides `json:"overrides"`
	Usage     struct {
		Sandboxes int     `json:"sandboxes"`
		CPU       float64 `json:"cpu"`
		RAMMB     int     `json:"ram_mb"`
	} `json:"usage"`
}

// QuotaOverrides set an org's limits; nil keeps the server default, 0
// means no limit.
type QuotaOverrides struct {
	MaxSandboxes *int     `json:"max_sandboxes"`
	MaxCPU       *float64 `json:"max_cpu"`
	MaxRAMMB     *int     `json:"max_ram_mb"`
}

// Quota returns an org's limits and usage (the token's own org, or any
// org for a platform admin).
func (s *OrgsService) Quota(ctx context.Context, orgID string) (*OrgQuota, error) {
	return fetchJSON[OrgQuota](ctx, s.c, "GET", "/v1/orgs/"+url.PathEscape(orgID)+"/quotas", nil, nil, "org %s quota", orgID)
}

// SetQuota replaces an org's overrides. Platform admins only.
func (s *OrgsService) SetQuota(ctx context.Context, orgID string, q QuotaOverrides) (*OrgQuota, error) {
	return fetchJSON[OrgQuota](ctx, s.c, "PUT", "/v1/orgs/"+url.PathEscape(orgID)+"/quotas", nil, q, "set org %s quota", orgID)
}
