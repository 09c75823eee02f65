// Package daytona serves Daytona's API on ptd's listener so that the stock
// @daytonaio/sdk works against Platinum by pointing DAYTONA_API_URL at
// http://HOST:PORT/daytona/api. Control-plane calls (/daytona/api/sandbox…,
// /daytona/api/snapshots…) are mapped onto the controlplane service; toolbox
// calls (/daytona/toolbox/<id>/…, the toolboxProxyUrl every sandbox DTO
// carries) are authenticated here and reverse-proxied to the sandbox's
// pt-agent, which implements Daytona's toolbox routes itself, so every user
// command runs inside the sandbox. docs/daytona.md says what maps to what.
package daytona

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"path"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/compat/compatkit"
	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/upstream"
)

// Paths of the surface on ptd's listener.
const (
	// APIPrefix is DAYTONA_API_URL's path.
	APIPrefix = "/daytona/api"
	// ToolboxPrefix is toolboxProxyUrl's path; the SDK appends /<id>/<route>.
	ToolboxPrefix = "/daytona/toolbox"
	// agentToolboxPrefix is where pt-agent serves the toolbox routes.
	agentToolboxPrefix = "/toolbox"
)

// Config tunes the Daytona surface.
type Config struct {
	// LifecycleWait bounds how long create, start, stop, archive and
	// delete wait for their target state before answering with the state
	// reached (the SDK then polls). It sits below the SDK's default 60 s
	// operation timeout so the SDK sees our answer.
	LifecycleWait time.Duration
	// Region is this ptd's region (ptd serve --region), each sandbox's
	// target; "local" when it has none.
	Region string
}

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{LifecycleWait: 55 * time.Second}
}

// Authenticator resolves a Daytona API key (a Platinum token) to its
// principal; tenancy.Service is one.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (controlplane.Principal, error)
}

// Handler serves Daytona's API and toolbox routing.
type Handler struct {
	cp    *controlplane.Service
	auth  Authenticator
	cfg   Config
	log   *slog.Logger
	mux   *http.ServeMux
	proxy *httputil.ReverseProxy
}

// New builds the handler.
func New(cp *controlplane.Service, auth Authenticator, cfg Config, logger *slog.Logger) *Handler {
	h := &Handler{cp: cp, auth: auth, cfg: cfg, log: logger, mux: http.NewServeMux()}
	h.proxy = h.newProxy()
	h.routes()
	return h
}

// Mount returns one handler for ptd's listener: paths under /daytona/ go to
// the Daytona surface, everything else to next unchanged.
func Mount(next http.Handler, cp *controlplane.Service, auth Authenticator, cfg Config, logger *slog.Logger) http.Handler {
	h := New(cp, auth, cfg, logger)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/daytona/") {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ServeHTTP serves one Daytona request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, ToolboxPrefix+"/") {
		h.serveToolbox(w, r)
		return
	}
	if _, pattern := h.mux.Handler(r); pattern == "" {
		h.writeError(w, r, &apiError{Status: http.StatusNotFound, Msg: "Cannot " + r.Method + " " + r.URL.Path})
		return
	}
	h.mux.ServeHTTP(w, r)
}

// handlerFunc is an authenticated handler that returns its error.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error

func (h *Handler) routes() {
	api := func(pattern string, fn handlerFunc) {
		method, path, _ := strings.Cut(pattern, " ")
		h.handle(method+" "+APIPrefix+path, fn)
	}
	api("POST /sandbox", h.create)
	api("GET /sandbox", h.list)
	api("GET /sandbox/paginated", h.list)
	api("GET /sandbox/{id}", h.get)
	api("DELETE /sandbox/{id}", h.delete)
	api("POST /sandbox/{id}/start", h.start)
	api("POST /sandbox/{id}/recover", h.start)
	api("POST /sandbox/{id}/snapshot", h.sandboxSnapshot)
	api("POST /sandbox/{id}/fork", h.fork)
	api("POST /sandbox/{id}/stop", h.stop)
	api("POST /sandbox/{id}/archive", h.archive)
	api("POST /sandbox/{id}/resize", h.resize)
	api("PUT /sandbox/{id}/labels", h.setLabels)
	api("POST /sandbox/{id}/autostop/{interval}", h.setTimer(timerStop))
	api("POST /sandbox/{id}/autoarchive/{interval}", h.setTimer(timerArchive))
	api("POST /sandbox/{id}/autodelete/{interval}", h.setTimer(timerDelete))
	api("POST /sandbox/{id}/ttl/{ttl}", h.setTTL)
	api("POST /sandbox/{id}/public/{public}", h.setPublic)
	api("POST /sandbox/{id}/network-settings", h.networkSettings)
	api("GET /sandbox/{id}/signing-key", h.getSigningKey)
	api("POST /sandbox/{id}/signing-key/rotate", h.rotateSigningKey)
	api("POST /sandbox/{id}/last-activity", h.lastActivity)
	api("GET /sandbox/{id}/toolbox-proxy-url", h.toolboxProxyURL)
	api("GET /sandbox/{id}/ports/{port}/preview-url", h.previewURL(false))
	api("GET /sandbox/{id}/ports/{port}/signed-preview-url", h.previewURL(true))
	api("GET /snapshots", h.listSnapshots)
	api("POST /snapshots", h.createSnapshotFromImage)
	api("GET /snapshots/{name}", h.getSnapshot)
	api("DELETE /snapshots/{name}", h.deleteSnapshot)
	api("POST /snapshots/{name}/activate", h.activateSnapshot)
	api("GET /config", h.config)
	h.mux.HandleFunc("GET "+APIPrefix+"/health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	// No Socket.IO event channel: 404 makes the SDK poll GET /sandbox/{id},
	// and every lifecycle call here answers in its final state, so the
	// SDK rarely polls at all.
}

// bearer returns the request's bearer token.
func bearer(r *http.Request) string {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return strings.TrimSpace(tok)
}

// handle registers a route that needs the API key (a Platinum token as
// the bearer, the same string as for /v1).
func (h *Handler) handle(pattern string, fn handlerFunc) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		p, err := h.auth.Authenticate(r.Context(), bearer(r))
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		if err := fn(w, r, p); err != nil {
			h.writeError(w, r, err)
		}
	})
}

// baseURL is scheme://host of the request, for URLs the SDK follows.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func toolboxURL(r *http.Request) string { return baseURL(r) + ToolboxPrefix }

type upstreamKey struct{}

// newProxy builds the toolbox reverse proxy: the upstream (the sandbox's
// agent) and its token ride in the request's context.
func (h *Handler) newProxy() *httputil.ReverseProxy {
	return compatkit.AgentProxy(h.log, func(pr *httputil.ProxyRequest) {
		up, _ := pr.In.Context().Value(upstreamKey{}).(target)
		pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", up.pool, up.addr
		pr.Out.URL.Path, pr.Out.URL.RawPath = agentToolboxPrefix+up.path, ""
		pr.Out.Header.Del("Authorization") // the API key stays with ptd
		pr.Out.Header.Set("X-Access-Token", up.token)
	}, func(w http.ResponseWriter, r *http.Request, err error) {
		h.log.Warn("daytona toolbox proxy", "path", r.URL.Path, "err", err)
		writeToolboxError(w, r, http.StatusBadGateway, "INTERNAL_SERVER_ERROR", "the sandbox did not answer: "+err.Error())
	})
}

// target is where one toolbox request goes: pool is addr's
// upstream.Host name.
type target struct{ pool, addr, token, path string }

// serveToolbox routes /daytona/toolbox/<id>/<route> to the sandbox's
// pt-agent once the bearer token is known and the sandbox is the caller's
// and running (another org's sandbox is not found). A signed file URL
// (signing.go) stands in for the bearer token on the two routes it can
// reach. POST /env is answered here: it changes the sandbox's own
// environment (PatchEnv), which ptd keeps and hands to the agent.
func (h *Handler) serveToolbox(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, ToolboxPrefix+"/")
	id, route, _ := strings.Cut(rest, "/")
	route = "/" + route
	if path.Clean(route) != route && path.Clean(route)+"/" != route {
		// Only the toolbox's own routes are reachable: no way out of
		// /toolbox/ to pt-agent's other endpoints.
		writeToolboxError(w, r, http.StatusBadRequest, "BAD_REQUEST", "toolbox paths must be clean (no '.', '..' or '//')")
		return
	}
	ctx := r.Context()
	var sb sandbox.Sandbox
	p, err := h.auth.Authenticate(ctx, bearer(r))
	if err == nil {
		sb, err = h.lookup(ctx, p, id)
	} else if op := signedOperation(r.Method, route); op != "" && bearer(r) == "" && r.URL.Query().Has("signature") {
		if sb, p, err = h.cp.AgentSandbox(ctx, id, "", false); err != nil {
			writeToolboxError(w, r, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("Sandbox with ID %s not found", id))
			return
		}
		if err := verifySignedURL(r, signingKey(sb), op, time.Now()); err != nil {
			writeToolboxError(w, r, http.StatusForbidden, "FORBIDDEN", "signed URL refused: "+err.Error())
			return
		}
	} else {
		writeToolboxError(w, r, http.StatusUnauthorized, "UNAUTHORIZED", "missing or unknown API key: set DAYTONA_API_KEY to a Platinum token")
		return
	}
	if err == nil && route == "/env" && r.Method == http.MethodPost {
		h.updateEnv(w, r, p, sb)
		return
	}
	if err == nil {
		var addr, token string
		if addr, token, err = h.cp.AgentEndpoint(ctx, p, sb.ID); err == nil {
			_ = http.NewResponseController(w).EnableFullDuplex()
			h.proxy.ServeHTTP(w, r.WithContext(context.WithValue(ctx, upstreamKey{}, target{pool: upstream.Host(sb, addr), addr: addr, token: token, path: route})))
			return
		}
	}
	h.toolboxFailure(w, r, id, err)
}

// toolboxFailure answers a toolbox call ptd could not route.
func (h *Handler) toolboxFailure(w http.ResponseWriter, r *http.Request, id string, err error) {
	var se *controlplane.StateError
	var fe *sandbox.FieldError
	switch {
	case errors.As(err, &se):
		writeToolboxError(w, r, http.StatusBadRequest, "BAD_REQUEST", fmt.Sprintf("sandbox %s is %s, not started; start it first", id, daytonaState(se.State)))
	case errors.As(err, &fe), errors.Is(err, sandbox.ErrInvalidArgument), errors.Is(err, controlplane.ErrEnvTooLarge):
		writeToolboxError(w, r, http.StatusBadRequest, "BAD_REQUEST", err.Error())
	case errors.Is(err, sandbox.ErrNotFound):
		writeToolboxError(w, r, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("Sandbox with ID or name %s not found", id))
	default:
		status, body := errorStatus(err)
		if status == http.StatusInternalServerError {
			h.log.Error("daytona toolbox request failed", "path", r.URL.Path, "err", err)
		}
		writeToolboxError(w, r, status, "INTERNAL_SERVER_ERROR", body.Message)
	}
}

// updateEnv is the toolbox's POST /env {set?, unset?, unsetValuePrefix?}
// (sandbox.updateEnv): unset names (and, with unsetValuePrefix, every
// variable whose value starts with it and that set does not name) are
// removed, then set is applied, in one patch of the sandbox's environment.
// Commands, sessions and PTYs started afterwards see it, it survives stops
// and starts, and the DTO's env shows it. Answers the resulting
// environment.
func (h *Handler) updateEnv(w http.ResponseWriter, r *http.Request, p controlplane.Principal, sb sandbox.Sandbox) {
	var req struct {
		Set              map[string]string `json:"set"`
		Unset            []string          `json:"unset"`
		UnsetValuePrefix string            `json:"unsetValuePrefix"`
	}
	if err := decodeJSON(r, &req); err != nil {
		writeToolboxError(w, r, http.StatusBadRequest, "INVALID_REQUEST_BODY", err.Error())
		return
	}
	changes := map[string]*string{}
	for _, k := range req.Unset {
		changes[k] = nil
	}
	if req.UnsetValuePrefix != "" {
		for k, v := range sb.Env {
			if _, set := req.Set[k]; !set && strings.HasPrefix(v, req.UnsetValuePrefix) {
				changes[k] = nil
			}
		}
	}
	for k, v := range req.Set {
		changes[k] = &v
	}
	res, err := h.cp.PatchEnv(r.Context(), p, sb.ID, changes)
	if err != nil {
		h.toolboxFailure(w, r, sb.ID, err)
		return
	}
	env := res.Sandbox.Env
	if env == nil {
		env = map[string]string{}
	}
	writeJSON(w, http.StatusOK, env)
}
