// Package store is the contract for Platinum's metadata store: orgs, API
// tokens, templates and sandboxes. Implementations live in subpackages
// (sqlite, the embedded default, and postgres) and all pass the shared
// suite in storetest.
//
// The store holds desired state. Every sandbox update is a compare-and-swap
// on Sandbox.Version, so two writers never silently overwrite each other.
//
// Conventions every implementation follows, so callers can compare records
// with cmp.Diff after a round trip:
//   - Times are stored in UTC truncated to microseconds (sandbox.TimeFormat)
//     and returned in UTC. A zero CreatedAt (or UpdatedAt) on insert means
//     "now"; the store picks it.
//   - Sandbox.Env and Sandbox.Metadata come back as non-nil maps, empty if
//     nothing was stored (nil and empty maps are the same thing).
//   - List methods return an empty result, not an error, when nothing
//     matches; single-row lookups return ErrNotFound.
//   - The store does not check that an OrgID names an existing org.
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
	RoleAdmin   Role = "admin"
	RoleMember  Role = "member"
	RoleSandbox Role = "sandbox"
)

// Token is an API bearer token. Only its SHA-256 hash is stored.
type Token struct {
	ID        string
	OrgID     string
	Role      Role
	Hash      string // hex SHA-256 of the secret
	CreatedAt time.Time
	// SandboxID, when set, scopes the token to that sandbox's children.
	SandboxID string
	// ProjectID, when set, scopes the token to that project: it sees and
	// creates sandboxes only there.
	ProjectID string
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
	// OrgID owns a custom template's versions (built from an image or a
	// Dockerfile); empty for the platform's templates, which every org
	// sees.
	OrgID string
	// BuildID is the build that made a custom version.
	BuildID string
	// Spec says what a custom version is made of and how its sandboxes
	// start; zero for platform templates.
	Spec TemplateSpec
	// HostID is the host whose ptd builds a platform version: a ptd
	// starting on a shared store fails the versions left building by its
	// own host (or a lost or unknown one, or none recorded), not those
	// another live host is building. Empty for custom versions (their
	// build records the host) and versions written before it was kept.
	HostID string
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
	OrgID  string        // empty: every org (for internal callers only)
	State  sandbox.State // empty: every state but deleted; StateDeleted lists deleted ones
	Limit  int           // <= 0: no limit
	Offset int           // < 0 counts as 0
	// IncludeDeleted includes deleted records.
	IncludeDeleted bool
	// ParentID filters to the children of one sandbox; RootsOnly to
	// sandboxes without a parent.
	ParentID  string
	RootsOnly bool
	// Metadata filters to sandboxes whose metadata has every pair.
	Metadata map[string]string
	// ProjectID filters to one project.
	ProjectID string
	// HostID filters to the sandboxes placed on one host.
	HostID string
	// ExcludeStates leaves out records in these states (the default
	// list leaves out destroyed and failed ones); State wins over it.
	ExcludeStates []sandbox.State
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

// EventStateChanged is the Event.Type UpdateSandbox writes when a sandbox's
// state changes; its Data is a StateChange.
const EventStateChanged = "state_changed"

// StateChange is the JSON Data of an EventStateChanged event. Consumers
// (SSE, webhooks, metering) decode it instead of re-reading the sandbox.
type StateChange struct {
	From   sandbox.State `json:"from"`
	To     sandbox.State `json:"to"`
	Reason string        `json:"reason"` // the sandbox's Reason after the change
}

// Store is the metadata store. All methods are safe for concurrent use.
type Store interface {
	ProjectStore
	TemplateBuildStore
	IdempotencyStore

	SessionStore
	PoolDemandStore

	// CreateOrg inserts an org; ErrConflict if the ID exists.
	CreateOrg(ctx context.Context, o Org) error
	// GetOrg returns ErrNotFound if absent.
	GetOrg(ctx context.Context, id string) (Org, error)
	// DeleteOrg removes an org and every token of it in one transaction,
	// so nothing can act as the org any more; its sandboxes, projects and
	// other records stay (the control plane deletes its sandboxes, which
	// final disposal purges later). ErrNotFound if absent.
	DeleteOrg(ctx context.Context, id string) error

	// CreateToken inserts a token; ErrConflict if its hash exists.
	CreateToken(ctx context.Context, t Token) error
	// TokenByHash returns ErrNotFound if no token has that hash.
	TokenByHash(ctx context.Context, hash string) (Token, error)

	// PutTemplateVersion inserts or replaces a template version by ID. A
	// replace keeps the stored CreatedAt; a zero UpdatedAt means now.
	PutTemplateVersion(ctx context.Context, v TemplateVersion) error
	// GetTemplateVersion returns ErrNotFound if absent.
	GetTemplateVersion(ctx context.Context, id string) (TemplateVersion, error)
	// LatestTemplateVersion returns the newest version of slug (any status),
	// by CreatedAt then ID; ErrNotFound if the slug has none.
	LatestTemplateVersion(ctx context.Context, slug string) (TemplateVersion, error)
	// ListTemplateVersions returns every version, newest first.
	ListTemplateVersions(ctx context.Context) ([]TemplateVersion, error)

	// CreateSandbox inserts s with Version 1 (whatever s.Version says);
	// ErrConflict if the ID exists. A zero UpdatedAt is set to CreatedAt.
	CreateSandbox(ctx context.Context, s sandbox.Sandbox) error
	// GetSandbox returns the sandbox with that ID in that org (any state,
	// deleted included); ErrNotFound if absent or in another org. An empty
	// orgID matches any org (for internal callers only).
	GetSandbox(ctx context.Context, orgID, id string) (sandbox.Sandbox, error)
	// UpdateSandbox writes s if the stored Version equals s.Version, and
	// stores Version+1; it returns the stored record. ErrConflict on a
	// version mismatch, ErrNotFound if absent (or if s.OrgID is set and
	// differs from the stored org). ID, OrgID and CreatedAt never change;
	// UpdatedAt is set to now; DeletedAt is written as given. If the state
	// changed, an EventStateChanged row is written in the same transaction.
	UpdateSandbox(ctx context.Context, s sandbox.Sandbox) (sandbox.Sandbox, error)
	// ModifySandbox is a read-modify-write of one sandbox under its row
	// lock: it reads the record with that ID (in orgID; any org if empty)
	// so that no other writer can change it meanwhile, calls fn on it
	// (again, on a fresh read, only if the database had to retry the
	// transaction) and writes what fn leaves as UpdateSandbox would
	// (Version+1, UpdatedAt now, an EventStateChanged row if the state
	// changed), in one transaction. Concurrent calls on one sandbox apply
	// one after another, each against the latest committed record: none
	// loses another's change and none needs a retry (the env merge of
	// PATCH …/env). fn must be quick and do no I/O: the row stays locked
	// while it runs; its changes to ID, OrgID, CreatedAt and Version are
	// ignored. An error from fn aborts with nothing changed and is returned
	// as is. ErrNotFound if absent (or in another org); ErrConflict if fn
	// gave the sandbox a name another live sandbox of its org holds.
	ModifySandbox(ctx context.Context, orgID, id string, fn func(*sandbox.Sandbox) error) (sandbox.Sandbox, error)
	// AdoptSandbox hands a running sandbox of fromOrgID (a warm pool's) to
	// s.OrgID, in one transaction: it writes s over the record with s.ID if
	// that is still in fromOrgID at s.Version — the new org, project,
	// parent, name, env, metadata, lifecycle fields and CreatedAt included
	// (state, size and host fields are kept as stored) — moves the
	// sandbox's sandbox-scoped tokens along, and records an
	// EventStateChanged from creating to the stored state in the new org,
	// as a create that booted would have. Version+1, UpdatedAt now.
	// ErrNotFound if absent or no longer in fromOrgID; ErrConflict on a
	// version mismatch or a name another live sandbox of the org holds.
	AdoptSandbox(ctx context.Context, fromOrgID string, s sandbox.Sandbox) (sandbox.Sandbox, error)
	// ListSandboxes returns one page and the total matching count, both read
	// from one snapshot.
	ListSandboxes(ctx context.Context, o ListOptions) (rows []sandbox.Sandbox, total int, err error)
	// SandboxesInStates returns every sandbox in any of the states, across
	// orgs (for the reconciler), oldest first (created_at, then id).
	SandboxesInStates(ctx context.Context, states ...sandbox.State) ([]sandbox.Sandbox, error)
	// SandboxTotals counts the sandboxes of every org by state, with the
	// resources they are sized for (one grouped query, for /metrics).
	// States with no sandbox are absent.
	SandboxTotals(ctx context.Context) ([]StateTotal, error)

	// AddEvent appends an event (type typ, data marshalled to JSON) for a
	// sandbox, e.g. a host event like start_ram_not_restored.
	AddEvent(ctx context.Context, orgID, sandboxID, typ string, data any) error

	// SandboxEvents returns one sandbox's events, oldest first.
	SandboxEvents(ctx context.Context, sandboxID string) ([]Event, error)

	// PurgeSandbox hard-deletes a deleted sandbox's record in one
	// transaction: it writes the ledger entry, queues deletion of the
	// entry's objects, and clears parent_id on the sandbox's children.
	// ErrNotFound if absent; ErrConflict if the record is not deleted.
	PurgeSandbox(ctx context.Context, id string, l LedgerEntry) error
	// Ledger returns the deletion ledger, oldest first.
	Ledger(ctx context.Context) ([]LedgerEntry, error)
	// ObjectDeletions returns up to limit queued object deletions.
	ObjectDeletions(ctx context.Context, limit int) ([]ObjectDeletion, error)
	// FinishObjectDeletion removes a queued deletion (done) or, with a
	// non-nil failure, records the attempt for a later retry.
	FinishObjectDeletion(ctx context.Context, id int64, failure error) error

	// Events returns events (of every org) with ID > afterID, oldest first,
	// at most limit (<= 0: no limit). IDs only grow, so the last ID seen is
	// a resumable cursor.
	Events(ctx context.Context, afterID int64, limit int) ([]Event, error)

	// Snapshots and backups (snapshots.go).
	SnapshotStore

	// Feeds: the event stream, webhooks and artifacts (feeds.go).
	Feeds

	// Hosts, leases and cross-process locks (cluster.go).
	ClusterStore

	// Close releases the store's resources. Calling it again is a no-op.
	Close() error
}

// StateTotal is how many sandboxes are in one state and what they are
// sized for, summed.
type StateTotal struct {
	State  sandbox.State
	Count  int
	CPU    float64
	RAMMB  int64
	DiskGB int64
}

// ObjectRef names one stored object and what it is (archive manifest,
// backup manifest, snapshot manifest, sidecar, descriptor).
type ObjectRef struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Kind   string `json:"kind"`
}

// LedgerEntry is one row of the deletion ledger: what a final disposal
// removed, and where it was. Buckets are the recorded ones; a bucket that
// was never recorded stays unknown (empty), never inferred.
type LedgerEntry struct {
	ID            int64
	OrgID         string
	SandboxID     string
	DeletedReason string
	// DeletedBy is who caused the deletion (sandbox.DeletedByPlatform or
	// DeletedByUser): what decided between the 30- and the 90-day
	// retention. Empty on rows written before it was recorded.
	DeletedBy      string
	PurgedAt       time.Time
	Objects        []ObjectRef
	SnapshotBucket string
}

// ObjectDeletion is a queued deletion of one object.
type ObjectDeletion struct {
	ID       int64
	Ref      ObjectRef
	QueuedAt time.Time
	Attempts int
}
