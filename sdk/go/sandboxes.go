package platinum

import (
	"context"
	"fmt"
	"iter"
	"net/url"
	"strconv"
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
	ID                string            `json:"id"`
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
	// Reason explains a failed or deleted state; empty otherwise.
	Reason    string     `json:"reason,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
}

// CreateSandboxRequest is the body of a create. Only Template is required;
// zero numeric fields take the server's defaults (1 CPU, 512 MB RAM, 2 GB
// disk).
type CreateSandboxRequest struct {
	Template string            `json:"template"`
	CPU      float64           `json:"cpu,omitempty"`
	RAMMB    int               `json:"ram_mb,omitempty"`
	DiskGB   int               `json:"disk_gb,omitempty"`
	Name     string            `json:"name,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// CreateOption changes how Create behaves.
type CreateOption func(*createOptions)

type createOptions struct {
	wait    bool
	timeout time.Duration
}

// maxServerWait is the longest wait_timeout_ms ptd accepts.
const maxServerWait = 600 * time.Second

// WaitForRunning makes Create return only once the sandbox is running. The
// server waits up to timeout (0 means its default of 60s; at most 10
// minutes); if that runs out, Create keeps polling the sandbox it made until
// it is running or failed or ctx is done. It never creates a second sandbox.
func WaitForRunning(timeout time.Duration) CreateOption {
	return func(o *createOptions) {
		o.wait = true
		o.timeout = timeout
	}
}

// SandboxesService groups the sandbox calls. Get it from Client.Sandboxes.
type SandboxesService struct {
	c *Client
}

// createResponse is a create answer: the sandbox, plus wait_timed_out on a
// 202.
type createResponse struct {
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
	var o createOptions
	for _, opt := range opts {
		opt(&o)
	}
	q := url.Values{}
	if o.wait {
		q.Set("wait_for_state", string(StateRunning))
		if o.timeout > 0 {
			t := min(o.timeout, maxServerWait)
			ms := max(int64((t+time.Millisecond-1)/time.Millisecond), 1)
			q.Set("wait_timeout_ms", strconv.FormatInt(ms, 10))
		}
	}
	var out createResponse
	if _, err := s.c.doJSON(ctx, "POST", "/v1/sandboxes", q, req, &out); err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	sb := &out.Sandbox
	if !o.wait || sb.State == StateRunning {
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

func (s *SandboxesService) get(ctx context.Context, id string, includeDeleted bool) (*Sandbox, error) {
	var q url.Values
	if includeDeleted {
		q = url.Values{"include_deleted": {"true"}}
	}
	var sb Sandbox
	if _, err := s.c.doJSON(ctx, "GET", "/v1/sandboxes/"+url.PathEscape(id), q, nil, &sb); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	return &sb, nil
}

// ListOptions filters and pages a sandbox listing. Zero values mean no
// filter, the server's default page size (50) and the first page.
type ListOptions struct {
	State  State
	Limit  int
	Offset int
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
func (s *SandboxesService) Delete(ctx context.Context, id string) (*Sandbox, error) {
	var sb Sandbox
	if _, err := s.c.doJSON(ctx, "DELETE", "/v1/sandboxes/"+url.PathEscape(id), nil, nil, &sb); err != nil {
		return nil, fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	return &sb, nil
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
	for {
		sb, err := s.get(ctx, id, want == StateDeleted)
		if err != nil {
			if ctx.Err() != nil {
				return last, fmt.Errorf("wait for sandbox %s to be %s: %w", id, want, ctx.Err())
			}
			return last, fmt.Errorf("wait for %s: %w", want, err)
		}
		last = sb
		if sb.State == want {
			return sb, nil
		}
		if hopeless(sb.State, want) {
			return sb, &StateError{ID: id, Want: want, Got: sb.State, Reason: sb.Reason}
		}
		if err := sleep(ctx, s.c.pollInterval); err != nil {
			return last, fmt.Errorf("wait for sandbox %s to be %s (still %s): %w", id, want, last.State, err)
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
