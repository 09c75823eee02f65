// Package e2b serves E2B's API on ptd's listener so that the stock `e2b`
// SDK works against Platinum by changing only environment variables
// (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY). Control-plane calls
// (/sandboxes, /v2/sandboxes, …) are mapped onto the controlplane service;
// in-sandbox (envd) calls, recognised by their E2b-Sandbox-Id header, are
// reverse-proxied to the sandbox's pt-agent, which already speaks envd's
// protocol, so they are routed rather than translated. The wire contract
// is ../../../../shared/reference/e2b.md (verified with e2b 2.51.0).
package e2b

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/metrics"
	"github.com/platinum-dev/platinum/internal/requestid"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Header names of E2B's envd routing (sent by the SDK on every envd call).
const (
	headerSandboxID   = "E2b-Sandbox-Id"
	headerSandboxPort = "E2b-Sandbox-Port"
	headerAccessToken = "X-Access-Token"
	headerAPIKey      = "X-Api-Key"
)

// EnvdPort is the port E2B's SDK names (E2b-Sandbox-Port) for envd; we
// route it to pt-agent.
const EnvdPort = "49983"

// RouteEnvd is the metrics route label of proxied envd traffic (its paths
// are the sandbox's, not ours).
const RouteEnvd = "envd"

// Config tunes the E2B surface.
type Config struct {
	// CreateWait bounds how long a create waits for the sandbox's agent to
	// accept RPCs before answering 503 sandbox_not_ready (and deleting the
	// sandbox). It sits below the SDK's default 60 s request timeout so the
	// SDK sees our answer, not its own abort.
	CreateWait time.Duration
	// LifecycleWait bounds pause and resume (connect) waits.
	LifecycleWait time.Duration
	// EnvdVersion is advertised in create/connect/get answers. The SDK
	// gates features on it (reference/e2b.md §2): 0.5.7 enables everything
	// pt-agent has; ≥ 0.6.2 would make the SDK send file metadata headers
	// pt-agent ignores.
	EnvdVersion string
	// Ports, when set, forwards traffic to sandbox ports other than
	// envd's (E2b-Sandbox-Port) once this handler has checked the token:
	// the preview proxy, so that traffic streams and counts as activity
	// the same way.
	Ports PortForwarder
}

// PortForwarder proxies a request to a port of a running sandbox.
type PortForwarder interface {
	ForwardPort(w http.ResponseWriter, r *http.Request, sb sandbox.Sandbox, port int)
}

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{CreateWait: 55 * time.Second, LifecycleWait: 55 * time.Second, EnvdVersion: "0.5.7"}
}

// Authenticator resolves an E2B API key (a Platinum token) to its
// principal; tenancy.Service is one.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (controlplane.Principal, error)
}

// Handler serves E2B's control-plane API and envd routing. Build it with
// New; Mount composes it with the native API.
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
	h := &Handler{auth: auth,
		cp: cp, cfg: cfg, log: logger,
		mux: http.NewServeMux(),
	}
	h.proxy = h.newProxy()
	h.routes()
	return h
}

// Mount returns one handler for ptd's listener: E2B requests (envd traffic
// carrying E2b-Sandbox-Id, and E2B control-plane paths) go to the E2B
// surface, everything else (/v1, /healthz) to next unchanged.
func Mount(next http.Handler, cp *controlplane.Service, auth Authenticator, logger *slog.Logger) http.Handler {
	return MountConfig(next, cp, auth, DefaultConfig(), logger)
}

// MountConfig is Mount with a Config.
func MountConfig(next http.Handler, cp *controlplane.Service, auth Authenticator, cfg Config, logger *slog.Logger) http.Handler {
	h := New(cp, auth, cfg, logger)
	// Both surfaces answer with X-Request-Id and are counted by route
	// (no-ops inside ptd's own chain, which does both already).
	return requestid.Middleware(metrics.Instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsE2B(r) {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})))
}

// IsE2B reports whether r belongs to the E2B surface: any request naming a
// sandbox in E2b-Sandbox-Id (envd traffic), or one of E2B's control-plane
// paths, none of which collide with /v1 or /healthz.
func IsE2B(r *http.Request) bool {
	if r.Header.Get(headerSandboxID) != "" {
		return true
	}
	p := r.URL.Path
	if p == "/health" {
		return true
	}
	for _, prefix := range []string{"/sandboxes", "/v2/sandboxes", "/snapshots", "/templates"} {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return true
		}
	}
	return false
}

// ServeHTTP serves one E2B request: envd traffic is proxied, the rest is
// the control-plane API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(headerSandboxID) != "" {
		metrics.SetRoute(r.Context(), RouteEnvd)
		h.serveEnvd(w, r)
		return
	}
	_, pattern := h.mux.Handler(r)
	if pattern == "" {
		h.writeError(w, r, h.noRoute(r))
		return
	}
	metrics.SetRoute(r.Context(), pattern)
	h.mux.ServeHTTP(w, r) // (sets the path values Handler does not)
}

// noRoute tells a wrong method (405) from an unknown path (404), in E2B's
// error body rather than ServeMux's plain text.
func (h *Handler) noRoute(r *http.Request) error {
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := h.mux.Handler(probe); pattern != "" {
			return &apiError{Status: http.StatusMethodNotAllowed, Msg: "method " + r.Method + " is not allowed on " + r.URL.Path}
		}
	}
	return &apiError{Status: http.StatusNotFound, Msg: "no E2B route " + r.Method + " " + r.URL.Path}
}

// handlerFunc is an authenticated control-plane handler that returns its
// error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error

func (h *Handler) routes() {
	h.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	h.handle("POST /sandboxes", h.create(1))
	h.handle("POST /v2/sandboxes", h.create(2))
	h.handle("GET /sandboxes", h.listV1)
	h.handle("GET /v2/sandboxes", h.listV2)
	h.handle("GET /sandboxes/metrics", h.batchMetrics)
	h.handle("GET /sandboxes/{id}", h.get)
	h.handle("DELETE /sandboxes/{id}", h.kill)
	h.handle("POST /sandboxes/{id}/timeout", h.setTimeout)
	h.handle("POST /sandboxes/{id}/refreshes", h.refresh)
	h.handle("POST /sandboxes/{id}/pause", h.pause)
	h.handle("POST /sandboxes/{id}/resume", h.resume)
	h.handle("POST /sandboxes/{id}/connect", h.connect(1))
	h.handle("POST /v2/sandboxes/{id}/connect", h.connect(2))
	h.handle("GET /sandboxes/{id}/metrics", h.metrics)

	h.handle("POST /sandboxes/{id}/snapshots", h.createSnapshot)
	h.handle("GET /snapshots", h.listSnapshots)
	h.handle("DELETE /templates/{id}", h.deleteSnapshot)
	h.handle("POST /sandboxes/{id}/fork", h.fork)
	h.handle("PUT /sandboxes/{id}/network", h.updateNetwork)
	// Logs have no Platinum mapping yet (pt-agent keeps no log of the
	// sandbox's processes); they answer 501 so callers learn it at once.
	for _, route := range []string{"GET /sandboxes/{id}/logs", "GET /v2/sandboxes/{id}/logs"} {
		h.handle(route, h.unsupported)
	}
}

// handle registers a route that needs X-API-Key (or a bearer token): E2B
// API keys are Platinum tokens, the same strings work.
func (h *Handler) handle(pattern string, fn handlerFunc) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimSpace(r.Header.Get(headerAPIKey))
		if tok == "" {
			tok, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			tok = strings.TrimSpace(tok)
		}
		p, err := h.auth.Authenticate(r.Context(), tok)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		if err := fn(w, r, p); err != nil {
			h.writeError(w, r, err)
		}
	})
}

func (h *Handler) unsupported(w http.ResponseWriter, r *http.Request, _ controlplane.Principal) error {
	return &apiError{Status: http.StatusNotImplemented, Msg: r.Pattern + " is not supported by Platinum's E2B surface yet"}
}

// background returns a context for cleanup that must outlive the request
// (a client that gave up must not leave a half-made sandbox behind).
func background(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}
