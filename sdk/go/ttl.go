package platinum

import (
	"context"
	"net/url"
	"time"
)

// Status is a sandbox's status (docs/lifecycle.md), next to State: a
// coarser view that also reflects activity and the TTL.
type Status string

// The statuses ptd reports. Ready is running with nothing in flight,
// Running has a command in flight, Idle has seen no activity for a while
// (or is stopped), Expiring is in the last minute of its TTL.
const (
	StatusCreating  Status = "creating"
	StatusStarting  Status = "starting"
	StatusReady     Status = "ready"
	StatusRunning   Status = "running"
	StatusIdle      Status = "idle"
	StatusExpiring  Status = "expiring"
	StatusDestroyed Status = "destroyed"
	StatusFailed    Status = "failed"
)

// Reasons a sandbox was destroyed (DestroyedReason).
const (
	DestroyedUserKilled = "user_killed"
	DestroyedTTLExpired = "ttl_expired"
)

// Include values for ListOptions.Include: lists leave destroyed and failed
// sandboxes out unless asked.
const (
	IncludeDestroyed = "destroyed"
	IncludeFailed    = "failed"
)

// SetTTL resets a live sandbox's countdown: it expires ttl after now, up
// to 24 hours after its creation (more is an APIError with code
// sandbox_ttl_exceeded; a destroyed sandbox gives sandbox_destroyed). The
// TTL is sent in whole milliseconds.
func (s *SandboxesService) SetTTL(ctx context.Context, id string, ttl time.Duration) (*Sandbox, error) {
	body := map[string]int64{"ttl_ms": ttl.Milliseconds()}
	return fetchJSON[Sandbox](ctx, s.c, "POST", sandboxPath(id)+"/ttl", nil, body, "set ttl of %s", id)
}

// Kill destroys a sandbox and returns its record (Status destroyed,
// DestroyedReason user_killed). It is idempotent by state: killing an
// already destroyed sandbox returns its record. Killing discards the
// sandbox's filesystem.
func (s *SandboxesService) Kill(ctx context.Context, id string) (*Sandbox, error) {
	return fetchJSON[Sandbox](ctx, s.c, "POST", sandboxPath(id)+"/kill", nil, nil, "kill %s", id)
}

// SetTTL is SandboxesService.SetTTL for this sandbox.
func (h *SandboxHandle) SetTTL(ctx context.Context, ttl time.Duration) (*Sandbox, error) {
	return h.s.SetTTL(ctx, h.id, ttl)
}

// Kill is SandboxesService.Kill for this sandbox.
func (h *SandboxHandle) Kill(ctx context.Context) (*Sandbox, error) { return h.s.Kill(ctx, h.id) }

// TemplateVersion is one immutable build of a template. Sandboxes keep the
// version they were created on; pin one with
// CreateSandboxRequest.TemplateVersionID.
type TemplateVersion struct {
	ID   string `json:"id"`
	Slug string `json:"slug"`
	// Version numbers the slug's builds: 1, 2, …
	Version   int            `json:"version"`
	Status    TemplateStatus `json:"status"`
	Progress  string         `json:"progress,omitempty"`
	SizeBytes int64          `json:"size_bytes"`
	Error     string         `json:"error,omitempty"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
	// Owner, BuildID, Settings, Source and Snapshot are as in Template.
	Owner    string            `json:"owner,omitempty"`
	BuildID  string            `json:"build_id,omitempty"`
	Settings *TemplateSettings `json:"settings,omitempty"`
	Source   *TemplateSource   `json:"source,omitempty"`
	Snapshot bool              `json:"snapshot,omitempty"`
}

// Versions lists every build of a template, newest first.
func (s *TemplatesService) Versions(ctx context.Context, slug string) ([]TemplateVersion, error) {
	return nonNil(fetchRows[TemplateVersion](ctx, s.c, "GET", "/v1/templates/"+url.PathEscape(slug)+"/versions", nil, nil, "template %s versions", slug))
}

// NewVersion starts a new build of a template and returns its version
// (status building); while a build runs it returns that build's version.
// Running sandboxes keep their version; creates get the new one once it
// is ready.
func (s *TemplatesService) NewVersion(ctx context.Context, slug string) (*TemplateVersion, error) {
	return fetchJSON[TemplateVersion](ctx, s.c, "POST", "/v1/templates/"+url.PathEscape(slug)+"/builds", nil, nil, "build template %s", slug)
}
