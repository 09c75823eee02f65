package store

import (
	"context"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// SessionStatus is the lifecycle status of a session (docs/sessions.md).
type SessionStatus string

// Session statuses. provisioning, ready and stopping are live: a context
// has at most one live session at a time.
const (
	SessionProvisioning SessionStatus = "provisioning"
	SessionReady        SessionStatus = "ready"
	SessionStopping     SessionStatus = "stopping"
	SessionStopped      SessionStatus = "stopped"
	SessionFailed       SessionStatus = "failed"
)

// Live reports whether a session in status st still holds (or is getting)
// an execution environment.
func (st SessionStatus) Live() bool {
	return st == SessionProvisioning || st == SessionReady || st == SessionStopping
}

// Session is an execution session owned by a context: a vault plus either a
// workflow or an agent session. Its sandbox is the execution environment;
// the context's workspace outlives it.
type Session struct {
	ID             string // ses_…
	OrgID          string
	VaultID        string
	WorkflowID     string // exactly one of WorkflowID and AgentSessionID is set
	AgentSessionID string
	Template       string
	SandboxID      string // empty until a sandbox is assigned
	Status         SessionStatus
	Reason         string
	// Warm is true when the session claimed a pre-provisioned sandbox.
	Warm      bool
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
	ReadyAt   *time.Time
	EndedAt   *time.Time
}

// Pool is the warm-pool setting of one template and runtime class: keep
// MinReady sandboxes ready, never more than Max pooled sandboxes in all.
type Pool struct {
	Template string
	// Runtime is the runtime class of the pool's sandboxes; empty is the
	// host's default class (every pool set before pools had a class).
	Runtime  string
	MinReady int
	Max      int
	// Auto sizes the pool from recent demand: its ready target moves
	// between MinReady and Max (docs/sessions.md, "Demand-sized pools").
	Auto      bool
	UpdatedAt time.Time
}

// SessionStore holds sessions and warm-pool settings. Store embeds it.
type SessionStore interface {
	// CreateSession inserts s with Version 1; ErrConflict if its ID exists
	// or its context already has a live session.
	CreateSession(ctx context.Context, s Session) error
	// GetSession returns the session with that ID in orgID (any org if
	// orgID is empty); ErrNotFound if absent or in another org.
	GetSession(ctx context.Context, orgID, id string) (Session, error)
	// ContextSession returns the newest session of a context (live ones
	// first); ErrNotFound if the context never had one.
	ContextSession(ctx context.Context, orgID, vaultID, workflowID, agentSessionID string) (Session, error)
	// SessionsByContextID returns the org's sessions whose workflow or
	// agent-session ID is id, newest first (for messages that say which
	// kind of ID a caller passed).
	SessionsByContextID(ctx context.Context, orgID, id string) ([]Session, error)
	// UpdateSession writes s if the stored Version equals s.Version and
	// returns the stored record (Version+1). Only Status, Reason,
	// SandboxID, ReadyAt and EndedAt change. ErrConflict on a version
	// mismatch, ErrNotFound if absent.
	UpdateSession(ctx context.Context, s Session) (Session, error)
	// ListSessions returns the org's sessions, newest first; live only
	// unless all.
	ListSessions(ctx context.Context, orgID string, all bool) ([]Session, error)
	// SessionsInStatuses returns every session in the statuses, across
	// orgs, oldest first.
	SessionsInStatuses(ctx context.Context, statuses ...SessionStatus) ([]Session, error)

	// ClaimPoolSandbox, in one transaction, takes the oldest running
	// sandbox of poolOrgID with that template whose metadata marks it
	// claimable (MetaPoolReady) and a member of the template's
	// default-class pool (MetaPool is the template itself, PoolKey), moves it and its sandbox-scoped tokens to
	// s.OrgID and projectID, replaces its metadata with {MetaSessionID: s.ID},
	// inserts s with SandboxID set to it, and records the claim as the
	// pool's demand (a PoolClaim with s.ID, at s.CreatedAt, warm, its
	// hand-over running: the refill sees the pool's member gone and the
	// claim holding its place at once). ErrNotFound if no sandbox is
	// claimable (nothing changes); ErrConflict as CreateSession (nothing
	// changes either).
	ClaimPoolSandbox(ctx context.Context, poolOrgID, template, projectID string, s Session) (sandbox.Sandbox, Session, error)

	// PutPool inserts or replaces the pool setting of p's template and
	// runtime class.
	PutPool(ctx context.Context, p Pool) error
	// ListPools returns every pool setting by template, then runtime
	// class.
	ListPools(ctx context.Context) ([]Pool, error)
}

// Metadata keys of pooled and session sandboxes.
const (
	// MetaPool names the pool a pooled sandbox belongs to (PoolKey).
	MetaPool = "pt_pool"
	// MetaPoolReady marks a pooled sandbox claimable ("1").
	MetaPoolReady = "pt_pool_ready"
	// MetaPoolClaim marks a pooled sandbox a create is taking (the time
	// the claim began, RFC 3339): no longer claimable, not yet the
	// caller's. One left there by a crash is discarded.
	MetaPoolClaim = "pt_pool_claim"
	// MetaSessionID names the session a sandbox serves.
	MetaSessionID = "pt_session_id"
)

// PoolKey is the MetaPool value of the pool of template and runtime
// class: the template alone for the default class (empty runtime), as
// before pools had classes, so that sessions, which boot the default
// class, claim only from it; "template@runtime" for another class.
func PoolKey(template, runtime string) string {
	if runtime == "" {
		return template
	}
	return template + "@" + runtime
}
