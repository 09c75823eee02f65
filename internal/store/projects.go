package store

import (
	"context"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Project groups an org's sandboxes (docs/access.md). Every org has
// exactly one default project, where sandboxes go when a create names
// none; a token may be scoped to one project.
type Project struct {
	ID        string // prj_…
	OrgID     string
	Name      string
	Default   bool
	CreatedAt time.Time
}

// OrgQuotas override the server's per-org limits for one org. A nil field
// means "the server default"; a zero value disables that limit.
type OrgQuotas struct {
	MaxSandboxes *int     `json:"max_sandboxes,omitempty"`
	MaxCPU       *float64 `json:"max_cpu,omitempty"`
	MaxRAMMB     *int     `json:"max_ram_mb,omitempty"`
}

// Usage is what an org's (or a host's) sandboxes in some states add up to.
type Usage struct {
	Sandboxes int
	CPU       float64
	RAMMB     int
	// DiskGB is summed by HostUsage only (org quotas bound no disk).
	DiskGB int
}

// ProjectStore holds projects, org quota overrides and org usage. Store
// embeds it.
type ProjectStore interface {
	// CreateProject inserts p; ErrConflict if its ID exists, its name is
	// taken in its org, or p.Default and the org has a default already.
	CreateProject(ctx context.Context, p Project) error
	// GetProject returns the project with that ID in orgID; ErrNotFound if
	// absent or in another org.
	GetProject(ctx context.Context, orgID, id string) (Project, error)
	// ListProjects returns the org's projects, oldest first.
	ListProjects(ctx context.Context, orgID string) ([]Project, error)
	// DefaultProject returns the org's default project; ErrNotFound if it
	// has none yet.
	DefaultProject(ctx context.Context, orgID string) (Project, error)
	// AssignProject puts every sandbox of orgID that has no project into
	// projectID (sandboxes made before projects existed) and reports how
	// many it moved.
	AssignProject(ctx context.Context, orgID, projectID string) (int, error)

	// ListOrgs returns every org, oldest first.
	ListOrgs(ctx context.Context) ([]Org, error)
	// OrgQuotas returns the org's overrides (all nil if none were set);
	// ErrNotFound if the org does not exist.
	OrgQuotas(ctx context.Context, orgID string) (OrgQuotas, error)
	// SetOrgQuotas replaces the org's overrides; ErrNotFound if the org
	// does not exist.
	SetOrgQuotas(ctx context.Context, orgID string, q OrgQuotas) error
	// OrgUsage sums the org's sandboxes in any of states.
	OrgUsage(ctx context.Context, orgID string, states ...sandbox.State) (Usage, error)
}
