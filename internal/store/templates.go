package store

import (
	"context"
	"time"
)

// TemplateSpec is what a custom template version is made of and how the
// sandboxes made from it start (docs/templates.md).
type TemplateSpec struct {
	Settings TemplateSettings `json:"settings"`
	Source   TemplateSource   `json:"source"`
	// Layers are the layer store's diff IDs the version's rootfs was
	// flattened from, base first (after BaseVersionID's rootfs, if any).
	Layers []string `json:"layers,omitempty"`
	// BaseVersionID is the template version a Dockerfile's FROM named,
	// whose rootfs lies under Layers.
	BaseVersionID string `json:"base_version_id,omitempty"`
	// Started is the started-state snapshot of a version built with
	// snapshot: true; nil without one.
	Started *StartedState `json:"started,omitempty"`
}

// TemplateSettings are a custom template's defaults for its sandboxes.
type TemplateSettings struct {
	// StartCmd runs in the background in every sandbox at each cold boot
	// (argv); ReadyCmd is run until it exits 0, within ReadyTimeoutMs,
	// before a create or start reports running.
	StartCmd       []string `json:"start_cmd,omitempty"`
	ReadyCmd       []string `json:"ready_cmd,omitempty"`
	ReadyTimeoutMs int      `json:"ready_timeout_ms,omitempty"`
	// Env is the default environment; a create's env wins key by key.
	Env map[string]string `json:"env,omitempty"`
	// User and Workdir are who processes run as and where, when a call
	// names neither.
	User    string `json:"user,omitempty"`
	Workdir string `json:"workdir,omitempty"`
	// CPU, RAMMB, DiskGB and Runtime are a create's defaults.
	CPU     float64 `json:"cpu,omitempty"`
	RAMMB   int     `json:"ram_mb,omitempty"`
	DiskGB  int     `json:"disk_gb,omitempty"`
	Runtime string  `json:"runtime,omitempty"`
	// Labels and ExposedPorts are informational, from the image or
	// Dockerfile.
	Labels       map[string]string `json:"labels,omitempty"`
	ExposedPorts []string          `json:"exposed_ports,omitempty"`
}

// TemplateSource says where a custom version came from.
type TemplateSource struct {
	// Kind is image, upload or dockerfile.
	Kind string `json:"kind"`
	// Image is the reference pulled (or a Dockerfile's FROM image), and
	// ImageDigest its linux/amd64 manifest's digest.
	Image       string `json:"image,omitempty"`
	ImageDigest string `json:"image_digest,omitempty"`
	// FromTemplate is a Dockerfile FROM that named a template.
	FromTemplate string `json:"from_template,omitempty"`
	// DockerfileSHA256 identifies the Dockerfile built.
	DockerfileSHA256 string `json:"dockerfile_sha256,omitempty"`
}

// StartedState is a version's started-state snapshot: a sandbox booted
// from it, its start command running and its ready command passed, with
// memory checkpointed. Creates of the same size and class restore it.
type StartedState struct {
	SnapshotID  string `json:"snapshot_id"`
	MemoryImage string `json:"memory_image"`
	// AgentToken is the token the agent in the memory image holds; a
	// restore re-keys it.
	AgentToken string  `json:"agent_token"`
	CPU        float64 `json:"cpu"`
	RAMMB      int     `json:"ram_mb"`
	DiskGB     int     `json:"disk_gb"`
	Runtime    string  `json:"runtime"`
}

// BuildStatus is where a template build is.
type BuildStatus string

// Template build statuses.
const (
	BuildRunning BuildStatus = "running"
	BuildReady   BuildStatus = "ready"
	BuildFailed  BuildStatus = "failed"
)

// TemplateBuild is one build of a custom template: an image pull, a
// tarball import or a Dockerfile build. A build that fails leaves no
// version; only the build record says what happened.
type TemplateBuild struct {
	ID     string // tbld_…
	OrgID  string
	Slug   string
	Status BuildStatus
	// Request is the accepted request, JSON (never credentials).
	Request string
	// VersionID is the version a ready build made.
	VersionID string
	// Error says why a build failed; Failure locates it in a Dockerfile.
	Error   string
	Failure *BuildFailure
	// Log is the build's log, NDJSON, capped.
	Log []byte
	// BoxID is the build sandbox while one runs, so that a crash can be
	// cleaned up.
	BoxID      string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
}

// BuildFailure locates a failed Dockerfile step.
type BuildFailure struct {
	Step        int    `json:"step"`
	Steps       int    `json:"steps"`
	Line        int    `json:"line"`
	Instruction string `json:"instruction"`
	// ExitCode is the failing RUN's exit status, nil for other failures.
	ExitCode *int `json:"exit_code,omitempty"`
}

// BuildFilter selects builds for ListTemplateBuilds; empty fields match
// everything.
type BuildFilter struct {
	OrgID  string
	Slug   string
	Status BuildStatus
}

// BuildCacheEntry is one cached Dockerfile step: the disk snapshot of the
// build sandbox after the step whose cache key (parent key, instruction,
// content hashes) is Key.
type BuildCacheEntry struct {
	OrgID      string
	Key        string
	SnapshotID string
	// Ready is false while the snapshot is being taken; a crash leaves
	// such entries for the start-up sweep.
	Ready     bool
	CreatedAt time.Time
	UsedAt    time.Time
}

// RegistryCredential is one org's credentials for one registry host.
type RegistryCredential struct {
	OrgID    string
	Registry string // host[:port], e.g. ghcr.io
	Username string
	// Sealed is the password or token, encrypted (internal/secrets); Kind
	// says which ("basic" or "token").
	Sealed    []byte
	Kind      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// TemplateBuildStore keeps custom templates' builds, build cache and
// registry credentials. Store embeds it.
type TemplateBuildStore interface {
	// ListTemplateVersionsOf returns the versions of slug owned by orgID
	// ("" for the platform's), newest first; every slug of the org when
	// slug is empty.
	ListTemplateVersionsOf(ctx context.Context, orgID, slug string) ([]TemplateVersion, error)
	// DeleteTemplateVersion removes a version record. Idempotent.
	DeleteTemplateVersion(ctx context.Context, id string) error

	// CreateTemplateBuild inserts a build; ErrConflict if the ID exists.
	CreateTemplateBuild(ctx context.Context, b TemplateBuild) error
	// UpdateTemplateBuild replaces a build's mutable fields (status,
	// version, error, failure, log, box, finished); UpdatedAt becomes now.
	// ErrNotFound if absent.
	UpdateTemplateBuild(ctx context.Context, b TemplateBuild) error
	// GetTemplateBuild returns a build of orgID (any org when empty);
	// ErrNotFound if absent or another org's.
	GetTemplateBuild(ctx context.Context, orgID, id string) (TemplateBuild, error)
	// ListTemplateBuilds returns matching builds, newest first, without
	// their logs.
	ListTemplateBuilds(ctx context.Context, f BuildFilter) ([]TemplateBuild, error)

	// PutBuildCache inserts or replaces a cache entry.
	PutBuildCache(ctx context.Context, e BuildCacheEntry) error
	// GetBuildCache returns ErrNotFound if the org has no entry for key.
	GetBuildCache(ctx context.Context, orgID, key string) (BuildCacheEntry, error)
	// ListBuildCache returns an org's entries (every org's when empty),
	// least recently used first.
	ListBuildCache(ctx context.Context, orgID string) ([]BuildCacheEntry, error)
	// DeleteBuildCache removes an entry. Idempotent.
	DeleteBuildCache(ctx context.Context, orgID, key string) error

	// PutRegistryCredential inserts or replaces an org's credentials for
	// a registry; a replace keeps CreatedAt.
	PutRegistryCredential(ctx context.Context, c RegistryCredential) error
	// GetRegistryCredential returns ErrNotFound if the org has none for
	// that registry.
	GetRegistryCredential(ctx context.Context, orgID, registry string) (RegistryCredential, error)
	// ListRegistryCredentials returns an org's credentials by registry.
	ListRegistryCredentials(ctx context.Context, orgID string) ([]RegistryCredential, error)
	// DeleteRegistryCredential returns ErrNotFound if there was none.
	DeleteRegistryCredential(ctx context.Context, orgID, registry string) error
}
