package platinum

import (
	"context"
	"fmt"
	"iter"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// State is a sandbox's lifecycle state.
type State string

// The lifecycle states ptd reports. Transitional states (creating,
// starting, stopping, archiving, restoring, deleting) always lead somewhere:
// the target state or failed.
const (
	StateCreating  State = "creating"
	StateStarting  State = "starting"
	StateRunning   State = "running"
	StateStopping  State = "stopping"
	StateStopped   State = "stopped"
	StateArchiving State = "archiving"
	StateArchived  State = "archived"
	StateRestoring State = "restoring"
	StateDeleting  State = "deleting"
	StateDeleted   State = "deleted"
	StateFailed    State = "failed"
)

// Sandbox is one sandbox as the API shows it. Environment values are never
// returned by the API, only their names (EnvKeys).
type Sandbox struct {
	// Progress shows how far an archive or restore got (nil otherwise).
	Progress          *Progress         `json:"progress,omitempty"`
	ID                string            `json:"id"`
	ProjectID         string            `json:"project_id,omitempty"`
	Name              string            `json:"name,omitempty"`
	State             State             `json:"state"`
	Template          string            `json:"template"`
	TemplateVersionID string            `json:"template_version_id,omitempty"`
	CPU               float64           `json:"cpu"`
	RAMMB             int               `json:"ram_mb"`
	DiskGB            int               `json:"disk_gb"`
	EnvKeys           []string          `json:"env_keys"`
	Metadata          map[string]string `json:"metadata"`
	HostID            string            `json:"host_id,omitempty"`
	// Runtime is the sandbox's runtime class (runc, gvisor).
	Runtime string `json:"runtime,omitempty"`
	// Region is the region whose store holds the sandbox; empty when the
	// server has no region.
	Region string `json:"region,omitempty"`
	// ParentID is the sandbox this one is a child of, set once at create;
	// empty for a top-level sandbox.
	ParentID string `json:"parent_id,omitempty"`
	// AutoResume says whether a request to a preview URL of the stopped or
	// archived sandbox starts it (the default); see SetAutoResume.
	AutoResume bool `json:"auto_resume"`
	// Reason explains a failed or deleted state, or an interrupted archive
	// or restore; empty otherwise.
	Reason    string     `json:"reason,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
	// DeletedReason says why a deleting or deleted sandbox is gone (one of
	// the Deleted* constants); empty on live sandboxes.
	DeletedReason string `json:"deleted_reason,omitempty"`

	// Type picks the retention defaults below; see SandboxType.
	Type SandboxType `json:"type,omitempty"`
	// AutoStopMinutes stops the sandbox after this many idle minutes.
	// AutoArchiveDays archives it, and AutoDeleteDays deletes it, that many
	// days after it stopped. Zero disables a timer.
	AutoStopMinutes int `json:"auto_stop_minutes"`
	AutoArchiveDays int `json:"auto_archive_days"`
	AutoDeleteDays  int `json:"auto_delete_days"`
	// ExpiresAt is when the sandbox expires; nil when it does not.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// TTLMs is the lifetime last asked for (at create or by SetTTL), in
	// milliseconds; ExpiresAt counts it from that request. 0: no TTL.
	TTLMs int64 `json:"ttl_ms,omitempty"`
	// Status is the sandbox's status (StatusReady, StatusIdle, …), next to
	// State.
	Status Status `json:"status,omitempty"`
	// OrgID is the sandbox's organization.
	OrgID string `json:"org_id,omitempty"`
	// TemplateSlug is Template; TemplateVersion numbers TemplateVersionID
	// among the template's builds (0 until known).
	TemplateSlug    string `json:"template_slug,omitempty"`
	TemplateVersion int    `json:"template_version,omitempty"`
	// DestroyedAt and DestroyedReason (DestroyedUserKilled,
	// DestroyedTTLExpired, …) are set once the sandbox is destroyed.
	DestroyedAt     *time.Time `json:"destroyed_at,omitempty"`
	DestroyedReason string     `json:"destroyed_reason,omitempty"`
	// Start is how the create got the sandbox running: "warm" (handed a
	// sandbox its template's warm pool booted ahead) or "cold" (booted for
	// this create); empty for sandboxes made before it was recorded.
	Start string `json:"start,omitempty"`
	// StartsOn says where a stopped or archived sandbox may start:
	// "any_host" (its disk is in the object store: archived, or stopped
	// with a current stop snapshot) or "own_host" (only HostID has it).
	StartsOn string `json:"starts_on,omitempty"`

	// Restore and RAMRestored say what the latest start brought back. They
	// are set only while the sandbox is running after a start (nil before
	// it runs, and on hosts that do not report them yet). RAMRestored false
	// means a cold boot: restart whatever the sandbox should be running.
	// LastStart keeps the same facts while the sandbox is stopped.
	Restore     *RestoreKind `json:"restore,omitempty"`
	RAMRestored *bool        `json:"ram_restored,omitempty"`

	// SecretNames are the sandbox's secrets (values are never returned).
	SecretNames []string `json:"secret_names,omitempty"`
	// Network is the outbound network policy (the default spelled out).
	Network *NetworkPolicy `json:"network,omitempty"`
}

// CreateSandboxRequest is the body of a create. Only Template is required;
// zero numeric fields take the server's defaults (1 CPU, 512 MB RAM, 2 GB
// disk).
type CreateSandboxRequest struct {
	// Template is a slug; empty takes the server's default (python-node
	// unless configured otherwise).
	Template string `json:"template,omitempty"`
	// TemplateVersionID (tplv_…) pins an immutable template version
	// instead of the slug's newest.
	TemplateVersionID string `json:"template_version_id,omitempty"`
	// TTLMs is the lifetime in milliseconds: positive, at most 3600000 at
	// creation (more is an APIError with code sandbox_ttl_exceeded). Zero
	// takes the default: 1 hour for python-node and node sandboxes, none
	// for others (the type's retention timers apply). Extend with SetTTL.
	TTLMs    int64             `json:"ttl_ms,omitempty"`
	CPU      float64           `json:"cpu,omitempty"`
	RAMMB    int               `json:"ram_mb,omitempty"`
	DiskGB   int               `json:"disk_gb,omitempty"`
	Name     string            `json:"name,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Runtime is the runtime class (runc, gvisor; GET /v1/hosts lists a
	// host's); empty takes the server's default. An unknown class is an
	// APIError with Field "runtime".
	Runtime string `json:"runtime,omitempty"`
	// Region is the region to make the sandbox in; empty takes the
	// server's own. A region the server does not know is an APIError with
	// code unknown_region, and nothing is created.
	Region string `json:"region,omitempty"`
	// ProjectID (prj_…) creates the sandbox in that project; empty takes
	// the parent's project for a child, else the org's default project.
	// An unknown project (or another org's) is an APIError not_found.
	ProjectID string `json:"project_id,omitempty"`
	// IdempotencyKey is the call's idempotency key (24-hour retry
	// window); empty lets the Client generate one.
	IdempotencyKey string `json:"-"`
	// ParentID makes the sandbox a child of that one, which must be
	// running and in the same organization (a missing parent gives an
	// APIError with code not_found, Field "parent_id"; one that is not
	// running, code conflict). It cannot be changed later.
	ParentID string `json:"parent_id,omitempty"`
	// AutoResume: nil keeps the default (on), new(false) turns it off; see
	// SetAutoResume.
	AutoResume *bool `json:"auto_resume,omitempty"`
	// Type picks the retention defaults; empty means TypePersistent.
	Type SandboxType `json:"type,omitempty"`
	// AutoStopMinutes, AutoArchiveDays and AutoDeleteDays override one of
	// the type's timers: nil keeps the default, new(0) disables the timer.
	AutoStopMinutes *int `json:"auto_stop_minutes,omitempty"`
	AutoArchiveDays *int `json:"auto_archive_days,omitempty"`
	AutoDeleteDays  *int `json:"auto_delete_days,omitempty"`
	// FromSnapshot (snap_…) or FromBackup (bkp_…) makes the sandbox a copy
	// of a snapshot or backup with its own identity: leave Template, CPU,
	// RAMMB and Runtime empty (they come from the source).
	FromSnapshot string `json:"from_snapshot,omitempty"`
	FromBackup   string `json:"from_backup,omitempty"`
	// Secrets are sealed at rest and never returned; see Secret.
	Secrets map[string]Secret `json:"secrets,omitempty"`
	// Network is the outbound policy; nil is the default (egress allowed).
	Network *NetworkPolicy `json:"network,omitempty"`
}

// CreateOption changes how Create behaves. WaitForRunning is one.
type CreateOption interface {
	applyCreate(*waitOptions)
}

// waitOptions is a requested wait: the state (empty: no wait) and the
// server-side timeout (zero: the server's default).
type waitOptions struct {
	state   State
	timeout time.Duration
}

// WaitOption makes a call return only once the sandbox reaches a state:
// running for Create and Start (WaitForRunning), stopped for Stop
// (WaitForStopped), archived for Archive (WaitForArchived). Passing a wait
// for a state the call does not lead to is an error. It is both a
// CreateOption and a LifecycleOption.
type WaitOption struct {
	w waitOptions
}

func (o WaitOption) applyCreate(w *waitOptions) { *w = o.w }

// maxServerWait is the longest wait_timeout_ms ptd accepts.
const maxServerWait = 600 * time.Second

// WaitForRunning makes Create (or Start, Resume) return only once the
// sandbox is running. The server waits up to timeout (0 means its default
// of 60s; at most 10 minutes); if that runs out (a 202), the call keeps
// polling the sandbox until it is running or can no longer get there, or
// ctx is done. Create never creates a second sandbox.
func WaitForRunning(timeout time.Duration) WaitOption {
	return WaitOption{waitOptions{state: StateRunning, timeout: timeout}}
}

// waitQuery is the wait_for_state and wait_timeout_ms query of a wait.
func waitQuery(w waitOptions) url.Values {
	q := url.Values{}
	if w.state == "" {
		return q
	}
	q.Set("wait_for_state", string(w.state))
	if w.timeout > 0 {
		t := min(w.timeout, maxServerWait)
		ms := max(int64((t+time.Millisecond-1)/time.Millisecond), 1)
		q.Set("wait_timeout_ms", strconv.FormatInt(ms, 10))
	}
	return q
}

// SandboxesService groups the sandbox calls. Get it from Client.Sandboxes.
type SandboxesService struct {
	c *Client
}

// waitResponse is an answer to a call that may wait (create, stop, start,
// archive): the sandbox, plus wait_timed_out on a 202.
type waitResponse struct {
	Sandbox
	WaitTimedOut bool `json:"wait_timed_out"`
}

// Create makes a sandbox from req.Template. Without options it returns at
// once with the sandbox in state creating. With WaitForRunning it returns
// the running sandbox; if the sandbox fails instead it returns the sandbox
// and a *StateError, and if ctx ends first it returns the sandbox as last
// seen together with ctx's error, so the caller can keep polling or delete
// it. Unknown templates give an APIError with code not_found.
func (s *SandboxesService) Create(ctx context.Context, req CreateSandboxRequest, opts ...CreateOption) (*Sandbox, error) {
	var o waitOptions
	for _, opt := range opts {
		opt.applyCreate(&o)
	}
	if o.state != "" && o.state != StateRunning {
		return nil, fmt.Errorf("create sandbox: a create can wait for %s only, not %s", StateRunning, o.state)
	}
	var out waitResponse
	if req.IdempotencyKey != "" {
		ctx = WithIdempotencyKey(ctx, req.IdempotencyKey)
	}
	if _, err := s.c.doJSON(ctx, "POST", "/v1/sandboxes", waitQuery(o), req, &out); err != nil {
		if sb, ferr := failedWait(err, "", StateRunning); sb != nil {
			return sb, ferr
		}
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	sb := &out.Sandbox
	if o.state == "" || sb.State == StateRunning {
		return sb, nil
	}
	// The server's wait ran out (202 wait_timed_out) or it answered before
	// running: the body names the sandbox, so poll it; never create again.
	return s.waitForState(ctx, sb.ID, StateRunning, sb)
}

// Get returns the sandbox with the given id. Unknown and deleted sandboxes,
// and other organizations' sandboxes, give an APIError with code not_found.
func (s *SandboxesService) Get(ctx context.Context, id string) (*Sandbox, error) {
	return s.get(ctx, id, false)
}

// sandboxPath is the path of one sandbox.
func sandboxPath(id string) string { return "/v1/sandboxes/" + url.PathEscape(id) }

func (s *SandboxesService) get(ctx context.Context, id string, includeDeleted bool) (*Sandbox, error) {
	var q url.Values
	if includeDeleted {
		q = url.Values{"include_deleted": {"true"}}
	}
	return fetchJSON[Sandbox](ctx, s.c, "GET", sandboxPath(id), q, nil, "sandbox %s", id)
}

// ListOptions filters and pages a sandbox listing. Zero values mean no
// filter, the server's default page size (50) and the first page. Filters
// combine: a sandbox must match all of them.
type ListOptions struct {
	State State
	// ParentID lists only the children of that sandbox. Without it (and
	// without RootsOnly) the list has every sandbox, children included.
	ParentID string
	// RootsOnly lists only top-level sandboxes, those without a parent.
	// It cannot be combined with ParentID.
	RootsOnly bool
	// Metadata lists only sandboxes whose metadata has every given pair.
	Metadata map[string]string
	// ProjectID lists only that project's sandboxes.
	ProjectID string
	// Include brings back what lists leave out by default:
	// IncludeDestroyed and IncludeFailed.
	Include []string
	Limit   int
	Offset  int
}

// SandboxList is one page of sandboxes, newest first, with the total number
// of sandboxes matching the filter (across all pages).
type SandboxList struct {
	Rows  []Sandbox `json:"rows"`
	Total int       `json:"total"`
}

// List returns one page of the organization's live sandboxes (deleted ones
// are excluded), newest first. Limit may be 1..200; larger values give an
// APIError with code invalid_request.
func (s *SandboxesService) List(ctx context.Context, opts ListOptions) (*SandboxList, error) {
	return s.list(ctx, opts, true)
}

func (s *SandboxesService) list(ctx context.Context, opts ListOptions, paginated bool) (*SandboxList, error) {
	q := url.Values{}
	if opts.State != "" {
		q.Set("state", string(opts.State))
	}
	switch {
	case opts.RootsOnly && opts.ParentID != "":
		return nil, fmt.Errorf("list sandboxes: set ParentID or RootsOnly, not both")
	case opts.RootsOnly:
		q.Set("parent_id", "none")
	case opts.ParentID != "":
		q.Set("parent_id", opts.ParentID)
	}
	for k, v := range opts.Metadata {
		q.Set("metadata["+k+"]", v)
	}
	if opts.ProjectID != "" {
		q.Set("project_id", opts.ProjectID)
	}
	if len(opts.Include) > 0 {
		q.Set("include", strings.Join(opts.Include, ","))
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Offset > 0 {
		q.Set("offset", strconv.Itoa(opts.Offset))
	}
	if paginated {
		q.Set("paginated", "true")
	}
	var out SandboxList
	if _, err := s.c.doJSON(ctx, "GET", "/v1/sandboxes", q, nil, &out); err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	if out.Rows == nil {
		out.Rows = []Sandbox{}
	}
	return &out, nil
}

// iteratePageSize is the page size Iterate uses when opts.Limit is zero.
const iteratePageSize = 100

// Iterate yields every sandbox matching opts, newest first, fetching pages
// of opts.Limit (default 100, at most 200) from opts.Offset on as the loop
// consumes them. On an error it yields (nil, err) once and stops. Pages are
// separate reads, so sandboxes created or deleted meanwhile can shift
// between pages.
func (s *SandboxesService) Iterate(ctx context.Context, opts ListOptions) iter.Seq2[*Sandbox, error] {
	return func(yield func(*Sandbox, error) bool) {
		page := opts
		if page.Limit <= 0 {
			page.Limit = iteratePageSize
		}
		page.Limit = min(page.Limit, 200)
		for {
			l, err := s.list(ctx, page, false)
			if err != nil {
				yield(nil, err)
				return
			}
			for i := range l.Rows {
				if !yield(&l.Rows[i], nil) {
					return
				}
			}
			if len(l.Rows) < page.Limit {
				return
			}
			page.Offset += len(l.Rows)
		}
	}
}

// Delete starts deleting the sandbox and returns it in state deleting; the
// teardown finishes in the background (use WaitForState with StateDeleted
// to wait for it). Unknown sandboxes give an APIError with code not_found.
// Deleting never deletes children, and a sandbox that still has live
// children gives an APIError with code conflict whose Children names them:
// delete those first.
func (s *SandboxesService) Delete(ctx context.Context, id string) (*Sandbox, error) {
	return fetchJSON[Sandbox](ctx, s.c, "DELETE", sandboxPath(id), nil, nil, "delete sandbox %s", id)
}

// WaitForState polls the sandbox until it is in state want and returns it.
// If it settles elsewhere for good (failed, or deleting/deleted when that
// is not what was asked for) it returns the sandbox and a *StateError. If
// ctx ends first it returns the sandbox as last seen and ctx's error.
// Waiting for StateDeleted also sees deleted sandboxes, which Get hides.
func (s *SandboxesService) WaitForState(ctx context.Context, id string, want State) (*Sandbox, error) {
	return s.waitForState(ctx, id, want, nil)
}

func (s *SandboxesService) waitForState(ctx context.Context, id string, want State, last *Sandbox) (*Sandbox, error) {
	g := goal{
		want:           want,
		reached:        func(sb *Sandbox) bool { return sb.State == want },
		hopeless:       func(sb *Sandbox) bool { return hopeless(sb.State, want) },
		includeDeleted: want == StateDeleted,
	}
	return s.waitUntil(ctx, id, g, last, nil)
}

// goal says when a wait is over.
type goal struct {
	want State
	// reached reports whether sb counts as being in want.
	reached func(sb *Sandbox) bool
	// hopeless reports whether sb can no longer reach want.
	hopeless func(sb *Sandbox) bool
	// includeDeleted makes the polls see deleted sandboxes.
	includeDeleted bool
}

// waitUntil polls the sandbox until g is reached (returning it) or
// hopeless (returning it and a *StateError), or ctx ends (returning it as
// last seen and ctx's error). It reads at once, then every poll interval.
// seen, if not nil, is called with every record read.
func (s *SandboxesService) waitUntil(ctx context.Context, id string, g goal, last *Sandbox, seen func(*Sandbox)) (*Sandbox, error) {
	for {
		sb, err := s.get(ctx, id, g.includeDeleted)
		if err != nil {
			if ctx.Err() != nil {
				return last, fmt.Errorf("wait for sandbox %s to be %s: %w", id, g.want, ctx.Err())
			}
			return last, fmt.Errorf("wait for %s: %w", g.want, err)
		}
		last = sb
		if seen != nil {
			seen(sb)
		}
		if g.reached(sb) {
			return sb, nil
		}
		if g.hopeless(sb) {
			return sb, &StateError{ID: id, Want: g.want, Got: sb.State, Reason: sb.Reason}
		}
		if err := sleep(ctx, s.c.pollInterval); err != nil {
			return last, fmt.Errorf("wait for sandbox %s to be %s (still %s): %w", id, g.want, last.State, err)
		}
	}
}

// hopeless reports whether a sandbox in state got can no longer reach want.
func hopeless(got, want State) bool {
	switch got {
	case StateFailed:
		return true
	case StateDeleting:
		return want != StateDeleted
	case StateDeleted:
		return true
	}
	return false
}

// Progress is how far a long operation on a sandbox got.
type Progress struct {
	Op         string `json:"op"`
	DoneBytes  int64  `json:"done_bytes"`
	TotalBytes int64  `json:"total_bytes"`
}

// Percent is the progress in whole percent, or -1 when there is none.
func (p *Progress) Percent() int64 {
	if p == nil || p.TotalBytes <= 0 {
		return -1
	}
	return 100 * p.DoneBytes / p.TotalBytes
}
