package platinum

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Session is an execution session owned by a context: a vault plus a
// workflow or an agent session. SessionID (ses_…) is what commands and
// file operations take; the context's IDs are not accepted in its place.
type Session struct {
	SessionID      string     `json:"session_id"`
	Status         string     `json:"status"` // provisioning, ready, stopping, stopped, failed
	Reason         string     `json:"reason"`
	VaultID        string     `json:"vault_id"`
	WorkflowID     string     `json:"workflow_id"`
	AgentSessionID string     `json:"agent_session_id"`
	Template       string     `json:"template"`
	SandboxID      string     `json:"sandbox_id"`
	Warm           bool       `json:"warm"`
	Workspace      Workspace  `json:"workspace"`
	CreatedAt      time.Time  `json:"created_at"`
	ReadyAt        *time.Time `json:"ready_at"`
	EndedAt        *time.Time `json:"ended_at"`
}

// Workspace is a context's durable workspace volume and where sessions
// see it.
type Workspace struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// Session statuses.
const (
	SessionProvisioning = "provisioning"
	SessionReady        = "ready"
	SessionStopping     = "stopping"
	SessionStopped      = "stopped"
	SessionFailed       = "failed"
	// SessionNone is the status of a context that never had a session.
	SessionNone = "none"
)

// Ready reports whether the session accepts commands.
func (s *Session) Ready() bool { return s.Status == SessionReady }

// SessionContext names the context that owns sessions. Set VaultID and
// exactly one of WorkflowID and AgentSessionID.
type SessionContext struct {
	VaultID        string `json:"vault_id"`
	WorkflowID     string `json:"workflow_id,omitempty"`
	AgentSessionID string `json:"agent_session_id,omitempty"`
}

// SessionCreateRequest asks for a session of a context.
type SessionCreateRequest struct {
	SessionContext
	// Template defaults to the server's session template.
	Template string `json:"template,omitempty"`
	// Wait, when positive, lets the server wait that long for a cold
	// session to become ready before answering.
	Wait time.Duration `json:"-"`
}

// ErrSessionNotReady is returned (wrapped) by SessionsService.Wait when the
// session ended (failed or stopped) instead of becoming ready, or the
// timeout passed first.
var ErrSessionNotReady = errors.New("session not ready")

// SessionsService groups the session calls. Get it from Client.Sessions.
type SessionsService struct {
	c *Client
}

func sessionPath(id string) string { return "/v1/sessions/" + url.PathEscape(id) }

func sessionWaitQuery(d time.Duration) url.Values {
	if d <= 0 {
		return nil
	}
	return url.Values{"wait_timeout_ms": {strconv.FormatInt(max(d.Milliseconds(), 1), 10)}}
}

// Create returns the context's live session or starts one. When the
// server answered 200 (a pooled sandbox was claimed, or the session was
// ready already) the session is Ready and takes commands at once; on 202
// it is provisioning: call Wait before running commands.
func (s *SessionsService) Create(ctx context.Context, req SessionCreateRequest) (*Session, error) {
	return fetchJSON[Session](ctx, s.c, "POST", "/v1/sessions", sessionWaitQuery(req.Wait), req, "create session")
}

// Get returns a session by its session ID.
func (s *SessionsService) Get(ctx context.Context, id string) (*Session, error) {
	return fetchJSON[Session](ctx, s.c, "GET", sessionPath(id), nil, nil, "get session %s", id)
}

// Wait waits up to timeout for the session to be ready. It returns the
// session as last read and, unless it is ready, an error wrapping
// ErrSessionNotReady that carries its status and reason: provisioning
// failures end in status failed with a reason, and a wait never runs
// forever.
func (s *SessionsService) Wait(ctx context.Context, id string, timeout time.Duration) (*Session, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("wait for session %s: timeout must be positive", id)
	}
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		var out Session
		if _, err := s.c.doJSON(ctx, "GET", sessionPath(id), sessionWaitQuery(max(min(left, 30*time.Second), time.Millisecond)), nil, &out); err != nil {
			return nil, fmt.Errorf("wait for session %s: %w", id, err)
		}
		switch {
		case out.Status == SessionReady:
			return &out, nil
		case out.Status != SessionProvisioning:
			return &out, fmt.Errorf("session %s is %s (%s): %w", id, out.Status, out.Reason, ErrSessionNotReady)
		case time.Until(deadline) <= 0:
			return &out, fmt.Errorf("session %s still provisioning after %s: %w", id, timeout, ErrSessionNotReady)
		}
	}
}

// Status looks a context's session up without starting anything. A
// context that never had a session has status SessionNone and an empty
// SessionID.
func (s *SessionsService) Status(ctx context.Context, c SessionContext) (*Session, error) {
	q := url.Values{"vault_id": {c.VaultID}}
	if c.WorkflowID != "" {
		q.Set("workflow_id", c.WorkflowID)
	}
	if c.AgentSessionID != "" {
		q.Set("agent_session_id", c.AgentSessionID)
	}
	return fetchJSON[Session](ctx, s.c, "GET", "/v1/sessions/status", q, nil, "session status")
}

// List returns the org's live sessions (all of them with all).
func (s *SessionsService) List(ctx context.Context, all bool) ([]Session, error) {
	var q url.Values
	if all {
		q = url.Values{"all": {"true"}}
	}
	return fetchField[[]Session](ctx, s.c, "GET", "/v1/sessions", q, nil, "sessions", "list sessions")
}

// Stop stops a session: its workspace is saved and its sandbox disposed
// of. With wait > 0 the server waits that long for it to be stopped.
func (s *SessionsService) Stop(ctx context.Context, id string, wait time.Duration) (*Session, error) {
	return fetchJSON[Session](ctx, s.c, "DELETE", sessionPath(id), sessionWaitQuery(wait), nil, "stop session %s", id)
}

// Exec runs a command in a ready session. A session that is not ready
// gives an APIError with code not_ready (provisioning) or session_ended.
func (s *SessionsService) Exec(ctx context.Context, id string, req ExecRequest) (*ExecResult, error) {
	b, err := req.body()
	if err != nil {
		return nil, fmt.Errorf("exec in session %s: %w", id, err)
	}
	var w execResultWire
	if _, err := s.c.doJSON(ctx, "POST", sessionPath(id)+"/exec", nil, b, &w); err != nil {
		return nil, fmt.Errorf("exec in session %s: %w", id, err)
	}
	return w.result(), nil
}

// Upload writes r to path inside a ready session's sandbox.
func (s *SessionsService) Upload(ctx context.Context, id, path string, r io.Reader) error {
	req, err := s.c.newRequest(ctx, "PUT", sessionPath(id)+"/files", url.Values{"path": {path}}, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := s.c.send(req)
	if err != nil {
		return fmt.Errorf("upload to session %s: %w", id, err)
	}
	resp.Body.Close()
	return nil
}

// Download opens a file of a ready session's sandbox; the caller closes it.
func (s *SessionsService) Download(ctx context.Context, id, path string) (io.ReadCloser, error) {
	req, err := s.c.newRequest(ctx, "GET", sessionPath(id)+"/files", url.Values{"path": {path}}, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.c.send(req)
	if err != nil {
		return nil, fmt.Errorf("download from session %s: %w", id, err)
	}
	if resp.StatusCode != http.StatusOK || isJSON(resp) {
		resp.Body.Close()
		return nil, fmt.Errorf("download from session %s: %s is a directory", id, path)
	}
	return resp.Body, nil
}

// Pool is one warm pool: a template's running sandboxes of one runtime
// class.
type Pool struct {
	Template string `json:"template"`
	// Runtime is the class of the pool's sandboxes; a create claims only
	// from its own class's pool.
	Runtime      string `json:"runtime"`
	MinReady     int    `json:"min_ready"`
	Max          int    `json:"max"`
	Ready        int    `json:"ready"`
	Provisioning int    `json:"provisioning"`
	// Source is "default" (ptd flags) or "api".
	Source string `json:"source"`
	// Auto pools size themselves from recent demand between MinReady
	// and Max; Target is the live sandboxes the pool keeps now (MinReady
	// for a fixed pool, either cut to the host's memory budget), Demand
	// the claims counted in the demand window and RefillMs the refill
	// time the target assumed (docs/sessions.md, "Demand-sized pools").
	Auto     bool  `json:"auto"`
	Target   int   `json:"target"`
	Demand   int   `json:"demand"`
	RefillMs int64 `json:"refill_ms"`
}

// PoolSettings is a pool's whole setting (PoolsService.SetWith).
type PoolSettings struct {
	// Runtime is the pool's runtime class; "" is the default class.
	Runtime  string
	MinReady int
	Max      int
	// Auto sizes the pool from recent demand between MinReady and Max
	// (then Max must be above MinReady).
	Auto bool
}

// PoolsService groups the warm-pool calls. Get it from Client.Pools.
type PoolsService struct {
	c *Client
}

// List returns every pool with its ready and provisioning counts.
func (s *PoolsService) List(ctx context.Context) ([]Pool, error) {
	return fetchField[[]Pool](ctx, s.c, "GET", "/v1/pools", nil, nil, "pools", "list pools")
}

// Set configures a template's pool of the default runtime class
// (platform admin token only).
func (s *PoolsService) Set(ctx context.Context, template string, minReady, max int) (*Pool, error) {
	return s.SetForRuntime(ctx, template, "", minReady, max)
}

// SetForRuntime configures a template's pool of one runtime class, e.g.
// "gvisor"; "" is the default class (platform admin token only).
func (s *PoolsService) SetForRuntime(ctx context.Context, template, runtime string, minReady, max int) (*Pool, error) {
	return s.SetWith(ctx, template, PoolSettings{Runtime: runtime, MinReady: minReady, Max: max})
}

// SetWith configures a template's pool with the whole setting, e.g. an
// auto pool (platform admin token only).
func (s *PoolsService) SetWith(ctx context.Context, template string, set PoolSettings) (*Pool, error) {
	in := map[string]any{"min_ready": set.MinReady, "max": set.Max}
	if set.Runtime != "" {
		in["runtime"] = set.Runtime
	}
	if set.Auto {
		in["auto"] = true
	}
	return fetchJSON[Pool](ctx, s.c, "PUT", "/v1/pools/"+url.PathEscape(template), nil, in, "set pool %s", template)
}
