// Package sessions is the control plane's sessions part: execution
// sessions owned by a context, the warm pools that make their sandboxes
// ahead of time, and the workspaces that outlive each session's sandbox
// (docs/sessions.md). It keeps its own records in the store and reaches
// sandboxes only through the core's public methods (Core), as the other
// parts (internal/tenancy, internal/events, internal/artifacts) do.
package sessions

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/crashpoint"
	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/syncs"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// Sessions (docs/sessions.md): an execution session is owned by a context — a
// vault plus a workflow or an agent session — and runs in one sandbox.
// The session ID (ses_…) and the context's IDs are different kinds and
// never accepted for each other. A context has at most one live session;
// its workspace (/workspace) outlives each session's sandbox.

// Config tunes sessions, warm pools and workspaces.
type Config struct {
	// DefaultTemplate is the template of sessions that name none; empty
	// means the core's default template (Core.DefaultTemplate).
	DefaultTemplate string
	// Pools are the warm-pool defaults (ptd --warm-pool), keyed by
	// template, or "template@class" for a runtime class other than the
	// default; PUT /v1/pools/{template} overrides them.
	Pools map[string]PoolSize
	// PoolInterval is how often pools are refilled and ready sessions
	// checked against their sandboxes (claims also refill at once).
	PoolInterval time.Duration
	// MaxPoolSize caps any pool's max.
	MaxPoolSize int
	// PoolBudgetMB caps the memory (members' ram_mb) all pools' ready
	// targets may hold on this host (ptd --warm-pool-budget-mb); 0 is no
	// cap (docs/sessions.md, "Demand-sized pools").
	PoolBudgetMB int
	// PoolDemandWindow is how far back an auto pool's claims count as its
	// demand (docs/sessions.md, "Demand-sized pools").
	PoolDemandWindow time.Duration
	// Objects is where workspaces go; nil keeps none (a stop cannot save
	// one).
	Objects objstore.Store
	// WorkspaceBucket is the object-store bucket of workspaces.
	WorkspaceBucket string
	// WorkspacePath is where a session's workspace is inside its sandbox.
	WorkspacePath string
	// StopTimeout bounds saving a workspace and disposing of a sandbox.
	StopTimeout time.Duration
	// ProvisionTimeout bounds preparing a pooled sandbox and restoring a
	// workspace into a claimed one (the core's ProvisionTimeout).
	ProvisionTimeout time.Duration
	// ReadyTimeout bounds a cold session's wait for its sandbox to run,
	// a template build included (the core's ProvisionTimeout plus its
	// TemplateBuildTimeout).
	ReadyTimeout time.Duration
	// DefaultWait bounds waits that ask for no timeout; MaxWait caps any
	// wait (as the core's).
	DefaultWait time.Duration
	MaxWait     time.Duration
	// PollInterval is the backstop poll of waits, covering writers this
	// process does not see (other API nodes).
	PollInterval time.Duration
}

// PoolSize is one warm pool's setting: keep MinReady sandboxes
// ready, never more than Max pooled sandboxes (ready or provisioning).
type PoolSize struct {
	MinReady int
	Max      int
	// Auto sizes the pool from recent demand, between MinReady and Max
	// (docs/sessions.md, "Demand-sized pools").
	Auto bool
}

// DefaultConfig returns the production defaults (no object store yet: the
// caller sets Objects).
func DefaultConfig() Config {
	return Config{
		PoolInterval:     time.Second,
		MaxPoolSize:      64,
		PoolDemandWindow: defaultDemandWindow,
		WorkspaceBucket:  "platinum-workspaces",
		WorkspacePath:    "/workspace",
		StopTimeout:      5 * time.Minute,
		ProvisionTimeout: 2 * time.Minute,
		ReadyTimeout:     22 * time.Minute,
		DefaultWait:      60 * time.Second,
		MaxWait:          10 * time.Minute,
		PollInterval:     time.Second,
	}
}

// PoolOrgID owns pooled sandboxes until a session claims one
// (controlplane.PoolOrgID).
const PoolOrgID = controlplane.PoolOrgID

// Principal is who calls (internal/tenancy).
type Principal = tenancy.Principal

// Core is what this part needs of the control plane's core
// (*controlplane.Service): sandboxes made, waited for, stopped and
// disposed of for the platform, two record changes, and agent clients.
// The core never calls back. Besides a session's claim here, a plain
// create claims pooled sandboxes (controlplane/warm.go), marking each it
// takes with WarmClaimOwner.
type Core interface {
	CreatePlatform(ctx context.Context, p Principal, r controlplane.CreateRequest) (sandbox.Sandbox, error)
	WaitFor(ctx context.Context, p Principal, id string, target sandbox.State, timeout time.Duration) (sandbox.Sandbox, bool, error)
	DeleteWithReason(ctx context.Context, id, reason string) (sandbox.Sandbox, error)
	StopWithReason(ctx context.Context, p Principal, id, reason string) (sandbox.Sandbox, error)
	KeepPersistent(ctx context.Context, id string) error
	SetPlatformMetadata(ctx context.Context, org, id, key, value string, want sandbox.State) (bool, error)
	AgentFor(sb sandbox.Sandbox) *agentclient.Client
	KnownTemplate(ctx context.Context, org, slug string) (bool, error)
	DefaultTemplate() string
	PoolRuntime(class string) (string, error)
	DefaultRuntime() string
	HostID() string
	WarmClaimOwner() string
}

// Service is the sessions part. Create it with New, call Run once the
// core has reconciled, and stop it with Close (before the core's), which
// waits for every background operation it started.
type Service struct {
	cfg   Config
	store store.Store
	core  Core
	// tenancy resolves a claim's project and checks the org's quotas.
	tenancy *tenancy.Service
	log     *slog.Logger
	// holder names this process in the store's leases (LeasePools).
	holder string
	notify *syncs.Notifier // wakes waiters on a session
	locks  syncs.KeyedMutex
	// pools signals warm-pool refills and tracks preparations.
	pools *poolState

	bg *syncs.Group // background work; Close ends and waits for it
}

// New builds the service over st, making sandboxes through core, with tn
// for claims' projects and quotas.
func New(cfg Config, st store.Store, core Core, tn *tenancy.Service, logger *slog.Logger) *Service {
	return &Service{
		cfg: cfg, store: st, core: core, tenancy: tn, log: logger,
		holder: "cp/" + core.HostID() + "/" + holderSuffix(),
		notify: &syncs.Notifier{}, pools: newPoolState(),
		bg: syncs.NewGroup(),
	}
}

// Close stops background work and waits for it. Sessions in flight are
// resumed by the next Run.
func (s *Service) Close() { s.bg.Close() }

// WorkspacePath is where sessions see their workspace.
func (s *Service) WorkspacePath() string { return s.cfg.WorkspacePath }

// Request asks for a session of a context.
type Request struct {
	VaultID        string
	WorkflowID     string
	AgentSessionID string
	Template       string
}

// Session is a session as callers see it.
type Session = store.Session

// EventType is the event type of every session status change; its
// data is an Event.
const EventType = "session_status_changed"

// Event is the data of a session_status_changed event, carrying
// the context so subscribers filter by session or by context.
type Event struct {
	SessionID      string `json:"session_id"`
	WorkflowID     string `json:"workflow_id"`
	AgentSessionID string `json:"agent_session_id"`
	VaultID        string `json:"vault_id"`
	Status         string `json:"status"`
	Reason         string `json:"reason"`
}

// NotReadyError refuses a command to a session that is not ready.
type NotReadyError struct {
	ID     string
	Status store.SessionStatus
	Reason string
}

// Error implements error.
func (e *NotReadyError) Error() string {
	switch e.Status {
	case store.SessionProvisioning:
		return fmt.Sprintf("session %s is provisioning; commands run only once it is ready (wait with GET /v1/sessions/%s?wait_timeout_ms=…)", e.ID, e.ID)
	case store.SessionFailed:
		return fmt.Sprintf("session %s failed (%s); start a new session of its context", e.ID, e.Reason)
	}
	return fmt.Sprintf("session %s is %s; start a new session of its context", e.ID, e.Status)
}

// Unwrap makes errors.Is(err, sandbox.ErrConflict) hold.
func (e *NotReadyError) Unwrap() error { return sandbox.ErrConflict }

var contextIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$`)

// validate checks the context fields and the kinds of IDs in them.
func (r *Request) validate() error {
	if r.VaultID == "" {
		return &sandbox.FieldError{Field: "vault_id", Reason: "is required"}
	}
	if !contextIDRE.MatchString(r.VaultID) {
		return &sandbox.FieldError{Field: "vault_id", Reason: "must be 1-128 letters, digits or ._:@/- starting with a letter or digit"}
	}
	if (r.WorkflowID == "") == (r.AgentSessionID == "") {
		return &sandbox.FieldError{Field: "workflow_id", Reason: "exactly one of workflow_id and agent_session_id is required"}
	}
	field, v := "workflow_id", r.WorkflowID
	if v == "" {
		field, v = "agent_session_id", r.AgentSessionID
	}
	if err := notSessionID(field, v); err != nil {
		return err
	}
	if !contextIDRE.MatchString(v) {
		return &sandbox.FieldError{Field: field, Reason: "must be 1-128 letters, digits or ._:@/- starting with a letter or digit"}
	}
	return nil
}

// notSessionID refuses a session or sandbox ID given as a context ID.
func notSessionID(field, v string) error {
	switch {
	case sandbox.ValidID(sandbox.PrefixSession, v):
		return &controlplane.IDKindError{Field: field, Got: "session_id", Want: field, ID: v,
			Hint: "a session_id names an execution session; pass the id of the context that owns it"}
	case sandbox.ValidID(sandbox.PrefixSandbox, v):
		return &controlplane.IDKindError{Field: field, Got: "sandbox_id", Want: field, ID: v,
			Hint: "a sandbox_id names an execution environment; pass the id of the owning context"}
	}
	return nil
}

// Create returns the context's live session, or starts one: from
// the warm pool of its template when a pooled sandbox is ready (the
// session is ready at once), else by provisioning a sandbox in the
// background (the session is provisioning). created is false when the
// context already had a live session.
func (s *Service) Create(ctx context.Context, p Principal, r Request) (ses Session, created bool, err error) {
	if p.SandboxID != "" {
		return Session{}, false, fmt.Errorf("a sandbox's token cannot manage sessions: %w", sandbox.ErrForbidden)
	}
	if err := r.validate(); err != nil {
		return Session{}, false, err
	}
	r.Template = cmp.Or(r.Template, s.cfg.DefaultTemplate, s.core.DefaultTemplate())
	if ok, err := s.core.KnownTemplate(ctx, p.OrgID, r.Template); err != nil || !ok {
		return Session{}, false, fmt.Errorf("template %q: %w", r.Template, &sandbox.NotFoundFieldError{Name: "template"})
	}
	for attempt := 0; ; attempt++ {
		cur, err := s.store.ContextSession(ctx, p.OrgID, r.VaultID, r.WorkflowID, r.AgentSessionID)
		switch {
		case err == nil && cur.Status == store.SessionStopping:
			// The previous session is saving the workspace: the new one
			// must see what it saved.
			prev, err := s.Wait(ctx, p, cur.ID, s.cfg.StopTimeout)
			if err != nil {
				return Session{}, false, err
			}
			if prev.Status == store.SessionStopping {
				return Session{}, false, fmt.Errorf("the context's previous session %s is still saving its workspace; retry: %w", prev.ID, sandbox.ErrConflict)
			}
			continue
		case err == nil && cur.Status.Live():
			return cur, false, nil
		case err != nil && !store.IsNotFound(err):
			return Session{}, false, err
		}
		ses, err = s.startSession(ctx, p, r)
		if errors.Is(err, store.ErrConflict) && attempt < 3 {
			continue // a concurrent create of the same context won; return its session
		}
		return ses, err == nil, err
	}
}

// startSession claims a pooled sandbox or provisions one.
func (s *Service) startSession(ctx context.Context, p Principal, r Request) (Session, error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	ses := Session{
		ID: sandbox.NewID(sandbox.PrefixSession), OrgID: p.OrgID, VaultID: r.VaultID,
		WorkflowID: r.WorkflowID, AgentSessionID: r.AgentSessionID, Template: r.Template,
		Status: store.SessionProvisioning, CreatedAt: now, UpdatedAt: now,
	}
	hasWorkspace, err := s.workspaceExists(ctx, ses)
	if err != nil {
		return Session{}, err
	}

	// Warm path: one transaction claims a pooled sandbox and records the
	// session; with nothing to restore the session is ready at once.
	warm := ses
	warm.Warm = true
	if !hasWorkspace {
		warm.Status, warm.ReadyAt = store.SessionReady, &now
	}
	projectID, err := s.sessionProject(ctx, p)
	if err != nil {
		return Session{}, err
	}
	sb, claimed, err := s.claimPooled(ctx, p, r.Template, projectID, warm)
	switch {
	case err == nil:
		// The claim's hand-over holds its place in the pool until this
		// answers; then the pool refills.
		defer s.sessionHandOver(ctx, claimed.ID)()
		s.kickPool()
		s.sessionEvent(ctx, claimed)
		s.log.InfoContext(ctx, "session claimed a warm sandbox", "session", claimed.ID, "sandbox", sb.ID)
		if hasWorkspace {
			crashpoint.Hit("session.warm.claimed") // claimed, workspace not restored
			// The restore finishes even if the caller goes away.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ProvisionTimeout)
			defer cancel()
			return s.readySession(rctx, claimed, sb), nil
		}
		// Pooled sandboxes hold nothing of a session's (a warm plain
		// create gets them too): the empty workspace is made here.
		if err := s.makeWorkspaceDir(ctx, sb); err != nil {
			bg := context.WithoutCancel(ctx)
			s.failSession(bg, claimed, "workspace dir: "+err.Error())
			return s.store.GetSession(bg, "", claimed.ID)
		}
		return claimed, nil
	case !store.IsNotFound(err):
		return Session{}, err
	}

	// Cold path: record the session, then create its sandbox.
	if err := s.store.CreateSession(ctx, ses); err != nil {
		return Session{}, err
	}
	ses.Version = 1
	s.sessionColdDemand(ctx, ses.ID, ses.Template)
	crashpoint.Hit("session.cold.recorded") // no sandbox yet
	s.kickPool()
	zero := 0
	sb, err = s.core.CreatePlatform(ctx, p, controlplane.CreateRequest{
		Template: r.Template, Type: sandbox.TypeEphemeral, AutoStopMinutes: &zero,
		Metadata: map[string]string{store.MetaSessionID: ses.ID},
	})
	if err != nil {
		s.setSession(context.WithoutCancel(ctx), ses, store.SessionFailed, "create: "+err.Error(), nil)
		return Session{}, err
	}
	crashpoint.Hit("session.cold.created") // the sandbox exists, the session does not name it
	ses.SandboxID = sb.ID
	ses, err = s.store.UpdateSession(ctx, ses)
	if err != nil {
		return Session{}, err
	}
	s.sessionEvent(ctx, ses)
	s.bg.GoFor(ctx, func(ctx context.Context) { s.provisionSession(ctx, ses.ID) })
	return ses, nil
}

// sessionProject is the project a claimed sandbox moves into: the
// caller's project for a project-scoped token, else the org's default.
func (s *Service) sessionProject(ctx context.Context, p Principal) (string, error) {
	if p.ProjectID != "" {
		return p.ProjectID, nil
	}
	prj, err := s.tenancy.DefaultProject(ctx, p.OrgID)
	if err != nil {
		return "", err
	}
	return prj.ID, nil
}

// claimPooled claims a pooled sandbox for ses if the org's quotas allow
// one more sandbox of the pool's size (the claim is the moment it starts
// counting against them).
func (s *Service) claimPooled(ctx context.Context, p Principal, template, projectID string, ses Session) (sandbox.Sandbox, Session, error) {
	unlock, err := s.tenancy.LockQuota(ctx, p.OrgID)
	if err != nil {
		return sandbox.Sandbox{}, Session{}, err
	}
	defer unlock()
	if err := s.tenancy.CheckQuota(ctx, p.OrgID, sandbox.DefaultCPU, sandbox.DefaultRAM); err != nil {
		return sandbox.Sandbox{}, Session{}, err
	}
	return s.store.ClaimPoolSandbox(ctx, PoolOrgID, template, projectID, ses)
}

// provisionSession waits for a cold session's sandbox, prepares its
// workspace and marks the session ready, or failed with a reason. It holds
// no lock while it waits, so a stop does not wait for provisioning; every
// status write is a compare-and-swap, so a stale provisioner changes
// nothing.
func (s *Service) provisionSession(ctx context.Context, id string) {
	ses, err := s.store.GetSession(ctx, "", id)
	if err != nil || ses.Status != store.SessionProvisioning {
		return
	}
	if ses.SandboxID == "" {
		// A crash between the sandbox's create and the session naming it
		// leaves a sandbox tagged with the session: adopt it, so it is
		// neither lost to the session nor left running unowned.
		sb, ok, err := s.sessionOrphan(ctx, ses)
		if err != nil {
			s.log.WarnContext(ctx, "session: look for its sandbox", "session", ses.ID, "err", err)
			return // Reconcile retries at the next start
		}
		if !ok {
			s.failSession(ctx, ses, "provisioning interrupted before a sandbox was created")
			return
		}
		ses.SandboxID = sb.ID
		if ses, err = s.store.UpdateSession(ctx, ses); err != nil {
			s.log.InfoContext(ctx, "session: adopt its sandbox", "session", id, "err", err)
			return
		}
		s.log.InfoContext(ctx, "session adopted the sandbox a crash left unnamed", "session", id, "sandbox", sb.ID)
	}
	p := Principal{OrgID: ses.OrgID}
	sb, ok, err := s.core.WaitFor(ctx, p, ses.SandboxID, sandbox.StateRunning, s.cfg.ReadyTimeout)
	if ctx.Err() != nil {
		return // shutting down: Reconcile resumes it
	}
	if err != nil || !ok {
		reason := "sandbox never became ready"
		switch {
		case err != nil:
			reason = "sandbox: " + err.Error()
		case sb.State == sandbox.StateFailed:
			reason = "sandbox failed: " + sb.Reason
		case sb.State != sandbox.StateCreating:
			reason = fmt.Sprintf("sandbox is %s (%s)", sb.State, sb.Reason)
		default:
			reason = "provisioning timed out"
		}
		s.failSession(ctx, ses, reason)
		return
	}
	s.readySession(ctx, ses, sb)
}

// sessionOrphan finds the live sandbox created for ses (tagged with its
// ID) that ses does not name yet.
func (s *Service) sessionOrphan(ctx context.Context, ses Session) (sandbox.Sandbox, bool, error) {
	rows, _, err := s.store.ListSandboxes(ctx, store.ListOptions{OrgID: ses.OrgID, Metadata: map[string]string{store.MetaSessionID: ses.ID}})
	if err != nil || len(rows) == 0 {
		return sandbox.Sandbox{}, false, err
	}
	return rows[0], true, nil
}

// readySession prepares the workspace of a provisioning session's running
// sandbox and marks it ready (or failed). It returns the session as
// stored.
func (s *Service) readySession(ctx context.Context, ses Session, sb sandbox.Sandbox) Session {
	if err := s.restoreWorkspace(ctx, ses, sb); err != nil {
		s.failSession(context.WithoutCancel(ctx), ses, "workspace restore: "+err.Error())
		out, _ := s.store.GetSession(context.WithoutCancel(ctx), "", ses.ID)
		return out
	}
	now := time.Now().UTC()
	out, err := s.setSession(ctx, ses, store.SessionReady, "", func(x *Session) { x.ReadyAt = &now })
	if err != nil {
		s.log.InfoContext(ctx, "session did not become ready", "session", ses.ID, "err", err)
		out, _ = s.store.GetSession(context.WithoutCancel(ctx), "", ses.ID)
	}
	return out
}

// failSession marks a session failed and disposes of its sandbox.
func (s *Service) failSession(ctx context.Context, ses Session, reason string) {
	if _, err := s.setSession(ctx, ses, store.SessionFailed, reason, func(x *Session) {
		now := time.Now().UTC()
		x.EndedAt = &now
	}); err != nil {
		s.log.InfoContext(ctx, "session failure not recorded", "session", ses.ID, "err", err)
		return
	}
	s.log.WarnContext(ctx, "session failed", "session", ses.ID, "reason", reason)
	if ses.SandboxID != "" {
		if _, err := s.core.DeleteWithReason(ctx, ses.SandboxID, "session_failed"); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			s.log.WarnContext(ctx, "dispose of a failed session's sandbox", "session", ses.ID, "err", err)
		}
	}
}

// setSession moves ses (as read) to status with a compare-and-swap, writes
// the session_status_changed event and wakes waiters. ErrConflict when the
// session changed meanwhile.
func (s *Service) setSession(ctx context.Context, ses Session, status store.SessionStatus, reason string, mutate func(*Session)) (Session, error) {
	ses.Status, ses.Reason = status, reason
	if mutate != nil {
		mutate(&ses)
	}
	out, err := s.store.UpdateSession(ctx, ses)
	if err != nil {
		return Session{}, err
	}
	s.sessionEvent(ctx, out)
	return out, nil
}

// sessionEvent records a session's status as a session_status_changed
// event (the SSE feed and webhooks read events), then wakes its waiters,
// so a waiter that sees the status also finds its event.
func (s *Service) sessionEvent(ctx context.Context, ses Session) {
	err := s.store.AddEvent(context.WithoutCancel(ctx), ses.OrgID, ses.SandboxID, EventType, Event{
		SessionID: ses.ID, WorkflowID: ses.WorkflowID, AgentSessionID: ses.AgentSessionID,
		VaultID: ses.VaultID, Status: string(ses.Status), Reason: ses.Reason,
	})
	if err != nil {
		s.log.WarnContext(ctx, "session event", "session", ses.ID, "err", err)
	}
	s.notify.Broadcast(ses.ID)
}

// Get returns a session of p's org. An ID of another kind (a
// workflow, agent-session or sandbox ID) is not found with a message that
// says which kind it is.
func (s *Service) Get(ctx context.Context, p Principal, id string) (Session, error) {
	if p.SandboxID != "" {
		return Session{}, fmt.Errorf("session %q: %w", id, sandbox.ErrNotFound)
	}
	if !sandbox.ValidID(sandbox.PrefixSession, id) {
		return Session{}, s.wrongSessionID(ctx, p, id)
	}
	ses, err := s.store.GetSession(ctx, p.OrgID, id)
	if err != nil {
		return Session{}, fmt.Errorf("session %q: %w", id, err)
	}
	return s.syncSession(ctx, ses), nil
}

// wrongSessionID explains a non-session ID passed as a session ID.
func (s *Service) wrongSessionID(ctx context.Context, p Principal, id string) error {
	e := &controlplane.IDKindError{Field: "session_id", Want: "session_id (ses_…)", ID: id}
	if sandbox.ValidID(sandbox.PrefixSandbox, id) {
		e.Got, e.Hint = "sandbox_id", "use /v1/sandboxes/"+id+" for the sandbox itself"
		return e
	}
	owned, err := s.store.SessionsByContextID(ctx, p.OrgID, id)
	if err != nil {
		return err
	}
	if len(owned) > 0 {
		o := owned[0]
		kind, q := "workflow_id", "workflow_id="+id
		if o.AgentSessionID == id {
			kind, q = "agent_session_id", "agent_session_id="+id
		}
		e.Got = kind
		e.Hint = fmt.Sprintf("its newest session is %s; look a context up with GET /v1/sessions/status?vault_id=%s&%s", o.ID, o.VaultID, q)
		return e
	}
	e.Hint = "session ids start with ses_; a workflow_id or agent_session_id names the owning context instead"
	return e
}

// syncSession ends a ready session whose sandbox is gone (deleted,
// failed) and returns the session as stored.
func (s *Service) syncSession(ctx context.Context, ses Session) Session {
	if ses.Status != store.SessionReady || ses.SandboxID == "" {
		return ses
	}
	sb, err := s.store.GetSandbox(ctx, ses.OrgID, ses.SandboxID)
	if err != nil && !store.IsNotFound(err) {
		return ses
	}
	var reason string
	switch {
	case err != nil:
		reason = "environment lost: its sandbox no longer exists"
	case sb.State == sandbox.StateDeleting || sb.State == sandbox.StateDeleted || sb.State == sandbox.StateFailed:
		reason = fmt.Sprintf("environment lost: its sandbox is %s (%s)", sb.State, sb.Reason)
	default:
		return ses
	}
	out, err := s.setSession(context.WithoutCancel(ctx), ses, store.SessionFailed, reason, func(x *Session) {
		now := time.Now().UTC()
		x.EndedAt = &now
	})
	if err != nil {
		cur, gerr := s.store.GetSession(ctx, "", ses.ID)
		if gerr != nil {
			return ses
		}
		return cur
	}
	return out
}

// Wait waits until the session is settled (ready, stopped or
// failed) or timeout runs out, and returns it as last read.
func (s *Service) Wait(ctx context.Context, p Principal, id string, timeout time.Duration) (Session, error) {
	if timeout <= 0 {
		timeout = s.cfg.DefaultWait
	}
	timeout = min(timeout, s.cfg.MaxWait)
	var ses Session
	_, err := syncs.Wait(ctx, timeout, s.cfg.PollInterval, func() <-chan struct{} { return s.notify.Channel(id) }, func() (bool, error) {
		got, err := s.Get(ctx, p, id)
		if err != nil {
			ses = Session{}
			return false, err
		}
		ses = got
		return ses.Status != store.SessionProvisioning && ses.Status != store.SessionStopping, nil
	})
	return ses, err
}

// StatusRequest names a context for a passive status lookup.
type StatusRequest struct {
	VaultID        string
	WorkflowID     string
	AgentSessionID string
}

// Status returns the context's session (its live one, else its
// newest); ok is false when the context never had one. It never starts
// an environment.
func (s *Service) Status(ctx context.Context, p Principal, r StatusRequest) (ses Session, ok bool, err error) {
	if p.SandboxID != "" {
		return Session{}, false, fmt.Errorf("a sandbox's token cannot read sessions: %w", sandbox.ErrForbidden)
	}
	req := Request{VaultID: r.VaultID, WorkflowID: r.WorkflowID, AgentSessionID: r.AgentSessionID}
	if err := req.validate(); err != nil {
		return Session{}, false, err
	}
	ses, err = s.store.ContextSession(ctx, p.OrgID, r.VaultID, r.WorkflowID, r.AgentSessionID)
	if store.IsNotFound(err) {
		return Session{}, false, nil
	}
	if err != nil {
		return Session{}, false, err
	}
	return s.syncSession(ctx, ses), true, nil
}

// List returns p's org's sessions, newest first; live ones only
// unless all.
func (s *Service) List(ctx context.Context, p Principal, all bool) ([]Session, error) {
	if p.SandboxID != "" {
		return []Session{}, nil
	}
	return s.store.ListSessions(ctx, p.OrgID, all)
}

// SandboxID returns the sandbox ID of a ready session, for commands
// and file operations; a session that is not ready refuses them.
func (s *Service) SandboxID(ctx context.Context, p Principal, id string) (string, error) {
	ses, err := s.Get(ctx, p, id)
	if err != nil {
		return "", err
	}
	if ses.Status != store.SessionReady {
		return "", &NotReadyError{ID: ses.ID, Status: ses.Status, Reason: ses.Reason}
	}
	return ses.SandboxID, nil
}

// Stop stops a session: the workspace is saved to the workspace
// store, then the sandbox is disposed of, in the background. Stopping an
// ended session returns it unchanged.
func (s *Service) Stop(ctx context.Context, p Principal, id string) (Session, error) {
	for {
		ses, err := s.Get(ctx, p, id)
		if err != nil {
			return Session{}, err
		}
		if !ses.Status.Live() || ses.Status == store.SessionStopping {
			return ses, nil
		}
		out, err := s.setSession(ctx, ses, store.SessionStopping, "user_stopped", nil)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return Session{}, err
		}
		s.bg.GoFor(ctx, func(ctx context.Context) { s.stopSession(ctx, id) })
		return out, nil
	}
}

// stopSession saves a stopping session's workspace (when it was ever
// ready), disposes of its sandbox and marks it stopped.
func (s *Service) stopSession(ctx context.Context, id string) {
	unlock := s.locks.Lock(id)
	defer unlock()
	ses, err := s.store.GetSession(ctx, "", id)
	if err != nil || ses.Status != store.SessionStopping {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StopTimeout)
	defer cancel()
	reason := ses.Reason
	if ses.SandboxID != "" {
		sb, err := s.store.GetSandbox(ctx, "", ses.SandboxID)
		if err == nil && ses.ReadyAt != nil && (sb.State == sandbox.StateStarting || sb.State == sandbox.StateRestoring) {
			// Coming back (a restart drives it): save once it runs.
			if got, _, werr := s.core.WaitFor(ctx, Principal{OrgID: ses.OrgID}, sb.ID, sandbox.StateRunning, s.cfg.StopTimeout/2); werr == nil {
				sb = got
			}
		}
		if ses.ReadyAt != nil && (err != nil || sb.State != sandbox.StateRunning) && !s.workspaceSavedSince(ctx, ses, ses.UpdatedAt) {
			// Nothing to save from: the session says its workspace was not
			// saved rather than ending as if it had been.
			state := "gone"
			if err == nil {
				state = string(sb.State)
			}
			reason = "workspace not saved: the sandbox is " + state
		}
		if err == nil && sb.State == sandbox.StateRunning && ses.ReadyAt != nil {
			if serr := s.saveWorkspaceRetrying(ctx, ses, sb); serr != nil {
				// The sandbox's disk holds the only copy of the workspace:
				// it is kept, stopped, in the session's org, rather than
				// disposed of with the work in it.
				s.log.ErrorContext(ctx, "workspace save", "session", id, "err", serr)
				reason = fmt.Sprintf("workspace save failed: %v; sandbox %s is kept stopped with the workspace on its disk", serr, sb.ID)
				if err := s.core.KeepPersistent(ctx, sb.ID); err != nil {
					s.log.ErrorContext(ctx, "keep the session sandbox for its workspace", "session", id, "sandbox", sb.ID, "err", err)
				} else if _, err := s.core.StopWithReason(ctx, Principal{OrgID: ses.OrgID, Role: store.RoleAdmin}, sb.ID, "workspace save failed"); err != nil {
					s.log.ErrorContext(ctx, "stop the session sandbox kept for its workspace", "session", id, "sandbox", sb.ID, "err", err)
				}
				now := time.Now().UTC()
				if _, err := s.setSession(context.WithoutCancel(ctx), ses, store.SessionFailed, reason, func(x *Session) { x.EndedAt = &now }); err != nil {
					s.log.ErrorContext(ctx, "record session failed", "session", id, "err", err)
				}
				return
			}
		}
		if _, err := s.core.DeleteWithReason(ctx, ses.SandboxID, "session_stopped"); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			s.log.ErrorContext(ctx, "dispose of session sandbox", "session", id, "err", err)
			return // stays stopping; Reconcile retries
		}
		if _, ok, err := s.core.WaitFor(ctx, Principal{OrgID: ses.OrgID}, ses.SandboxID, sandbox.StateDeleted, s.cfg.StopTimeout); err == nil && !ok {
			s.log.WarnContext(ctx, "session sandbox still being deleted", "session", id, "sandbox", ses.SandboxID)
		}
	}
	now := time.Now().UTC()
	if _, err := s.setSession(context.WithoutCancel(ctx), ses, store.SessionStopped, reason, func(x *Session) { x.EndedAt = &now }); err != nil {
		s.log.ErrorContext(ctx, "record session stopped", "session", id, "err", err)
		return
	}
	s.log.InfoContext(ctx, "session stopped", "session", id)
}

// saveWorkspaceRetrying saves the session's workspace, retrying with
// backoff (an object store may be down for a while: docs/testing.md,
// "Faults") until three quarters of the stop's time are spent, leaving the
// rest to dispose of the sandbox.
func (s *Service) saveWorkspaceRetrying(ctx context.Context, ses Session, sb sandbox.Sandbox) error {
	deadline := time.Now().Add(s.cfg.StopTimeout * 3 / 4)
	wait := 200 * time.Millisecond
	for {
		err := s.saveWorkspace(ctx, ses, sb)
		if err == nil || ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return err
		}
		s.log.WarnContext(ctx, "workspace save failed; retrying", "session", ses.ID, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(wait*2, 10*time.Second)
	}
}

// reconcileSessions resumes sessions a restart left in flight: its own
// host's, not those whose sandbox another live host runs (ptds share
// the store: docs/ARCHITECTURE.md, "Many hosts"), whose ptd drives them.
func (s *Service) reconcileSessions(ctx context.Context) error {
	sess, err := s.store.SessionsInStatuses(ctx, store.SessionProvisioning, store.SessionStopping)
	if err != nil {
		return fmt.Errorf("reconcile sessions: %w", err)
	}
	for _, ses := range sess {
		if s.sessionElsewhere(ctx, ses) {
			continue
		}
		id := ses.ID
		if ses.Status == store.SessionStopping {
			s.bg.Go(func(ctx context.Context) { s.stopSession(ctx, id) })
			continue
		}
		if ses.Warm && ses.SandboxID != "" {
			// A warm claim interrupted while restoring its workspace:
			// its hand-over (store.PoolClaim) ends once this one does.
			s.bg.Go(func(ctx context.Context) {
				defer s.sessionHandOver(ctx, id)()
				unlock := s.locks.Lock(id)
				defer unlock()
				cur, err := s.store.GetSession(ctx, "", id)
				if err != nil || cur.Status != store.SessionProvisioning {
					return
				}
				sb, err := s.store.GetSandbox(ctx, "", cur.SandboxID)
				if err != nil || sb.State != sandbox.StateRunning {
					s.failSession(ctx, cur, "environment lost during provisioning")
					return
				}
				s.readySession(ctx, cur, sb)
			})
			continue
		}
		s.bg.Go(func(ctx context.Context) { s.provisionSession(ctx, id) })
	}
	return nil
}

// sessionElsewhere reports whether ses's sandbox runs on another host
// that is not lost. A session with no sandbox yet, or one that cannot be
// read, is resumed here.
func (s *Service) sessionElsewhere(ctx context.Context, ses Session) bool {
	if ses.SandboxID == "" {
		return false
	}
	sb, err := s.store.GetSandbox(ctx, "", ses.SandboxID)
	if err != nil || sb.HostID == "" || sb.HostID == s.core.HostID() {
		return false
	}
	h, err := s.store.GetHost(ctx, sb.HostID)
	return err == nil && h.State != store.HostLost
}

// holderSuffix tells this process's lease holder from another's on the
// same host.
func holderSuffix() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}
