package platinum

import (
	"context"
	"net/url"
	"time"
)

// TemplateStatus is where a template's newest version is in its build.
type TemplateStatus string

// The statuses a template can have. Sandboxes of a template that is still
// building stay in state creating until the build finishes.
const (
	TemplateReady    TemplateStatus = "ready"
	TemplateBuilding TemplateStatus = "building"
	TemplateFailed   TemplateStatus = "failed"
	TemplateNotBuilt TemplateStatus = "not_built"
)

// Template is a template (e.g. "pt-base", "busybox") and the state of its
// newest version.
type Template struct {
	Slug string `json:"slug"`
	// VersionID is the newest version ("tplv_…"); empty when never built.
	VersionID string         `json:"version_id,omitempty"`
	Status    TemplateStatus `json:"status"`
	// Progress is a human line about a running build, e.g. "debootstrap:
	// unpacking 80/120 packages".
	Progress  string `json:"progress,omitempty"`
	SizeBytes int64  `json:"size_bytes"`
	// Error says why the last build failed.
	Error     string    `json:"error,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Version numbers VersionID among the template's builds (1, 2, …).
	Version int `json:"version,omitempty"`
	// Default is true for the server's default template, which creates
	// that name no template get.
	Default bool `json:"default"`
	// Owner is "org" for the org's own template, "platform" otherwise;
	// an org template says how its newest version was built and what its
	// sandboxes start with.
	Owner    string            `json:"owner,omitempty"`
	BuildID  string            `json:"build_id,omitempty"`
	Settings *TemplateSettings `json:"settings,omitempty"`
	Source   *TemplateSource   `json:"source,omitempty"`
	// Snapshot is true when creates of the template's size and class
	// restore its started state.
	Snapshot bool `json:"snapshot,omitempty"`
}

// TemplatesService groups the template calls. Get it from Client.Templates.
type TemplatesService struct {
	c *Client
}

// List returns every template the server knows.
func (s *TemplatesService) List(ctx context.Context) ([]Template, error) {
	return nonNil(fetchRows[Template](ctx, s.c, "GET", "/v1/templates", nil, nil, "list templates"))
}

// Get returns one template; unknown slugs give an APIError with code
// not_found. Poll it to follow a build's Progress.
func (s *TemplatesService) Get(ctx context.Context, slug string) (*Template, error) {
	return fetchJSON[Template](ctx, s.c, "GET", "/v1/templates/"+url.PathEscape(slug), nil, nil, "template %s", slug)
}

// Build starts building a new version of the template and returns it
// (status building). The build runs in the background; poll Get to follow
// it. Building ahead of time makes the first sandbox of a template fast.
func (s *TemplatesService) Build(ctx context.Context, slug string) (*Template, error) {
	return fetchJSON[Template](ctx, s.c, "POST", "/v1/templates/"+url.PathEscape(slug)+"/build", nil, nil, "build template %s", slug)
}
