package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/sessions"
	"github.com/platinum-dev/platinum/internal/store"
)

// sessionBody is POST /v1/sessions. The camelCase names are
// accepted too.
type sessionBody struct {
	VaultID        string `json:"vault_id"`
	WorkflowID     string `json:"workflow_id"`
	AgentSessionID string `json:"agent_session_id"`
	Template       string `json:"template"`

	VaultIDCamel        string `json:"vaultId"`
	WorkflowIDCamel     string `json:"workflowId"`
	AgentSessionIDCamel string `json:"agentSessionId"`
}

// sessionContext fills req's vault, workflow and agent-session IDs from
// their snake_case and camelCase spellings (aliases.go).
func sessionContext(req *sessions.Request, v [3][2]string) error {
	var err error
	if req.VaultID, err = aliasString(v[0][0], v[0][1], "vault_id", "vaultId"); err != nil {
		return err
	}
	if req.WorkflowID, err = aliasString(v[1][0], v[1][1], "workflow_id", "workflowId"); err != nil {
		return err
	}
	req.AgentSessionID, err = aliasString(v[2][0], v[2][1], "agent_session_id", "agentSessionId")
	return err
}

type workspaceView struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// sessionView is a session on the wire. There is no "id" field on
// purpose: session_id (ses_…) is the only ID that commands accept, and
// the context's IDs are returned under their own names.
type sessionView struct {
	SessionID string `json:"session_id"`
	// SessionIDCamel mirrors session_id under its camelCase name.
	SessionIDCamel string        `json:"sessionId"`
	Status         string        `json:"status"`
	Reason         string        `json:"reason,omitempty"`
	VaultID        string        `json:"vault_id"`
	WorkflowID     string        `json:"workflow_id,omitempty"`
	AgentSessionID string        `json:"agent_session_id,omitempty"`
	Template       string        `json:"template"`
	SandboxID      string        `json:"sandbox_id,omitempty"`
	Warm           bool          `json:"warm"`
	Workspace      workspaceView `json:"workspace"`
	CreatedAt      string        `json:"created_at"`
	UpdatedAt      string        `json:"updated_at"`
	ReadyAt        *string       `json:"ready_at"`
	EndedAt        *string       `json:"ended_at"`
}

func optTimeView(t *time.Time) *string {
	if t == nil {
		return nil
	}
	v := sandbox.FormatTime(*t)
	return &v
}

func (a *API) sessionView(s sessions.Session) sessionView {
	return sessionView{
		SessionID: s.ID, SessionIDCamel: s.ID, Status: string(s.Status), Reason: s.Reason,
		VaultID: s.VaultID, WorkflowID: s.WorkflowID, AgentSessionID: s.AgentSessionID,
		Template: s.Template, SandboxID: s.SandboxID, Warm: s.Warm,
		Workspace: workspaceView{Name: sessions.WorkspaceName(s), Path: a.ses.WorkspacePath()},
		CreatedAt: sandbox.FormatTime(s.CreatedAt), UpdatedAt: sandbox.FormatTime(s.UpdatedAt),
		ReadyAt: optTimeView(s.ReadyAt), EndedAt: optTimeView(s.EndedAt),
	}
}

// sessionWait reads ?wait_timeout_ms= (0: do not wait).
func sessionWait(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait_timeout_ms")
	if v == "" {
		return 0, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return 0, badRequest("wait_timeout_ms must be a positive integer", "wait_timeout_ms")
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// sessionStatusCode is 200 for a settled session and 202 while it is
// provisioning or stopping.
func sessionStatusCode(s sessions.Session) int {
	if s.Status == store.SessionProvisioning || s.Status == store.SessionStopping {
		return http.StatusAccepted
	}
	return http.StatusOK
}

func (a *API) createSession(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b sessionBody
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	wait, err := sessionWait(r)
	if err != nil {
		return err
	}
	var req sessions.Request
	if err := sessionContext(&req, [3][2]string{{b.VaultID, b.VaultIDCamel}, {b.WorkflowID, b.WorkflowIDCamel}, {b.AgentSessionID, b.AgentSessionIDCamel}}); err != nil {
		return err
	}
	req.Template = b.Template
	ses, _, err := a.ses.Create(r.Context(), p, req)
	if err != nil {
		return err
	}
	return a.settleSession(w, r, p, ses, store.SessionProvisioning, wait)
}

func (a *API) getSession(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	wait, err := sessionWait(r)
	if err != nil {
		return err
	}
	var ses sessions.Session
	if wait > 0 {
		ses, err = a.ses.Wait(r.Context(), p, r.PathValue("id"), wait)
	} else {
		ses, err = a.ses.Get(r.Context(), p, r.PathValue("id"))
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.sessionView(ses))
	return nil
}

func (a *API) stopSession(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	wait, err := sessionWait(r)
	if err != nil {
		return err
	}
	ses, err := a.ses.Stop(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	return a.settleSession(w, r, p, ses, store.SessionStopping, wait)
}

// settleSession answers a create or a stop, which leave the session in
// the passing status moving: when the caller asked to wait (wait > 0) and
// it is still passing, it waits for it to settle first; the answer is 200
// once settled, 202 while not (sessionStatusCode).
func (a *API) settleSession(w http.ResponseWriter, r *http.Request, p controlplane.Principal, ses sessions.Session, passing store.SessionStatus, wait time.Duration) error {
	if wait > 0 && ses.Status == passing {
		var err error
		if ses, err = a.ses.Wait(r.Context(), p, ses.ID, wait); err != nil {
			return err
		}
	}
	writeJSON(w, sessionStatusCode(ses), a.sessionView(ses))
	return nil
}

func (a *API) listSessions(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	all, _ := strconv.ParseBool(r.URL.Query().Get("all"))
	return respondRows(w, "sessions", a.sessionView)(a.ses.List(r.Context(), p, all))
}

// sessionStatus is the passive lookup by context: it reads, never starts.
func (a *API) sessionStatus(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	q := r.URL.Query()
	var sr sessions.Request
	if err := sessionContext(&sr, [3][2]string{{q.Get("vault_id"), q.Get("vaultId")}, {q.Get("workflow_id"), q.Get("workflowId")},
		{q.Get("agent_session_id"), q.Get("agentSessionId")}}); err != nil {
		return err
	}
	req := sessions.StatusRequest{VaultID: sr.VaultID, WorkflowID: sr.WorkflowID, AgentSessionID: sr.AgentSessionID}
	ses, ok, err := a.ses.Status(r.Context(), p, req)
	if err != nil {
		return err
	}
	if !ok {
		writeJSON(w, http.StatusOK, map[string]any{
			"status": "none", "session_id": nil, "sessionId": nil, "vault_id": req.VaultID,
			"workflow_id": req.WorkflowID, "agent_session_id": req.AgentSessionID,
		})
		return nil
	}
	writeJSON(w, http.StatusOK, a.sessionView(ses))
	return nil
}

// viaSession runs a sandbox handler (exec, files) against a ready
// session's sandbox; a session that is not ready refuses with not_ready.
func (a *API) viaSession(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
		sbx, err := a.ses.SandboxID(r.Context(), p, r.PathValue("id"))
		if err != nil {
			return err
		}
		r.SetPathValue("id", sbx)
		return h(w, r, p)
	}
}

type poolBody struct {
	MinReady *int `json:"min_ready"`
	Max      *int `json:"max"`
	// Runtime is the pool's runtime class; empty (or absent) is the
	// default class. The query's runtime says the same.
	Runtime string `json:"runtime"`
	// Auto sizes the pool from demand between min_ready and max
	// (docs/sessions.md, "Demand-sized pools"); absent is off.
	Auto bool `json:"auto"`
}

type poolView struct {
	Template     string `json:"template"`
	Runtime      string `json:"runtime"`
	MinReady     int    `json:"min_ready"`
	Max          int    `json:"max"`
	Ready        int    `json:"ready"`
	Provisioning int    `json:"provisioning"`
	Source       string `json:"source"`
	// Auto, Target (the live sandboxes the refill keeps now), Demand
	// (claims in the demand window) and RefillMs (the refill time the
	// target assumed): docs/sessions.md, "Demand-sized pools".
	Auto     bool  `json:"auto"`
	Target   int   `json:"target"`
	Demand   int   `json:"demand"`
	RefillMs int64 `json:"refill_ms"`
}

func toPoolView(ps sessions.PoolStatus) poolView {
	return poolView{Template: ps.Template, Runtime: ps.Runtime, MinReady: ps.MinReady, Max: ps.Max, Ready: ps.Ready,
		Provisioning: ps.Provisioning, Source: ps.Source,
		Auto: ps.Auto, Target: ps.Target, Demand: ps.Demand, RefillMs: ps.RefillTime.Milliseconds()}
}

func (a *API) listPools(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	return respondRows(w, "pools", toPoolView)(a.ses.Pools(r.Context(), p))
}

func (a *API) setPool(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error {
	var b poolBody
	if err := decodeJSON(r, &b, false); err != nil {
		return err
	}
	if b.MinReady == nil {
		return badRequest("min_ready is required", "min_ready")
	}
	mx := *b.MinReady
	if b.Max != nil {
		mx = *b.Max
	}
	class := b.Runtime
	if q := r.URL.Query().Get("runtime"); q != "" {
		if class != "" && class != q {
			return badRequest("runtime in the query and the body differ", "runtime")
		}
		class = q
	}
	size := sessions.PoolSize{MinReady: *b.MinReady, Max: mx, Auto: b.Auto}
	return respond(w, http.StatusOK, toPoolView)(a.ses.SetPoolSize(r.Context(), p, r.PathValue("template"), class, size))
}
