// Package store is the contract for Platinum's metadata store: orgs, API
// tokens, templates and sandboxes. Implementations live in subpackages
// (sqlite, later postgres) and all pass the shared suite in storetest.
//
// The store holds desired state. Every sandbox update is a compare-and-swap
// on Sandbox.Version, so two writers never silently overwrite each other.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Errors returned by every Store implementation. They wrap the sandbox
// categories so transports map them without knowing about the store.
var (
	// ErrNotFound: no row with that key (in that org).
	ErrNotFound = sandbox.ErrNotFound
	// ErrConflict: a version check failed or a unique key is taken.
	ErrConflict = sandbox.ErrConflict
)

// IsNotFound reports whether err is ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// Org is a tenant. Every resource belongs to exactly one org.
type Org struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// Role of an API token.
type Role string

// Token roles. An admin token may also manage orgs.
const (
	RoleAdmin  Role = "admin"
	RoleMember Role = "member"
)

// Token is an API bearer token. Only its SHA-256 hash is stored.
type Token struct {
	ID        string
	OrgID     string
	Role      Role
	Hash      string // hex SHA-256 of the secret
	CreatedAt time.Time
}

// TemplateVersion is one immutable build of a template slug.
type TemplateVersion struct {
	ID     string // tplv_…
	Slug   string // pt-base, busybox, …
	Status TemplateStatus
	// Progress is a short human line about the build ("debootstrap: 40%").
	Progress string
	// RootFS is the host path of the read-only lower dir, once ready.
	RootFS    string
	SizeBytes int64
	Error     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// TemplateStatus is the build status of a template version.
type TemplateStatus string

// Template build statuses.
const (
	TemplateBuilding TemplateStatus = "building"
	TemplateReady    TemplateStatus = "ready"
	TemplateFailed   TemplateStatus = "failed"
)

// ListOptions filter and page sandbox lists. Results are ordered by
// created_at desc, then id desc.
type ListOptions struct {
	OrgID  string
	State  sandbox.State // empty: every state but deleted
	Limit  int
	Offset int
	// IncludeDeleted includes deleted records.
	IncludeDeleted bool
}

// Event is an append-only record of something that happened to a sandbox.
type Event struct {
	ID        int64
	OrgID     string
	SandboxID string
	Type      string // e.g. "state_changed"
	Data      string // JSON
	CreatedAt time.Time
}

// Store is the metadata store. All methods are safe for concurrent use.
type Store interface {
	// CreateOrg inserts an org; ErrConflict if the ID exists.
	CreateOrg(ctx context.Context, o Org) error
	// GetOrg returns ErrNotFound if absent.
	GetOrg(ctx context.Context, id string) (Org, error)

	// CreateToken inserts a token; ErrConflict if its hash exists.
	CreateToken(ctx context.Context, t Token) error
	// TokenByHash returns ErrNotFound if no token has that hash.
	TokenByHash(ctx context.Context, hash string) (Token, error)

	// PutTemplateVersion inserts or replaces a template version by ID.
	PutTemplateVersion(ctx context.Context, v TemplateVersion) error
	// GetTemplateVersion returns ErrNotFound if absent.
	GetTemplateVersion(ctx context.Context, id string) (TemplateVersion, error)
	// LatestTemplateVersion returns the newest version of slug (any status);
	// ErrNotFound if the slug has none.
	LatestTemplateVersion(ctx context.Context, slug string) (TemplateVersion, error)
	// ListTemplateVersions returns every version, newest first.
	ListTemplateVersions(ctx context.Context) ([]TemplateVersion, error)

	// CreateSandbox inserts s with Version 1; ErrConflict if the ID exists.
	CreateSandbox(ctx context.Context, s sandbox.Sandbox) error
	// GetSandbox returns the sandbox with that ID in that org (any state,
	// deleted included); ErrNotFound if absent or in another org. An empty
	// orgID matches any org (for internal callers only).
	GetSandbox(ctx context.Context, orgID, id string) (sandbox.Sandbox, error)
	// UpdateSandbox writes s if the stored Version equals s.Version, and
	// stores Version+1; it returns the stored record. ErrConflict on a
	// version mismatch, ErrNotFound if absent. If the state changed, an
	// event row is written in the same transaction.
	UpdateSandbox(ctx context.Context, s sandbox.Sandbox) (sandbox.Sandbox, error)
	// ListSandboxes returns one page and the total matching count, both read
	// from one snapshot.
	ListSandboxes(ctx context.Context, o ListOptions) (rows []sandbox.Sandbox, total int, err error)
	// SandboxesInStates returns every sandbox in any of the states, across
	// orgs (for the reconciler).
	SandboxesInStates(ctx context.Context, states ...sandbox.State) ([]sandbox.Sandbox, error)

	// Events returns events after the given ID, oldest first, at most limit.
	Events(ctx context.Context, afterID int64, limit int) ([]Event, error)

	Close() error
}
