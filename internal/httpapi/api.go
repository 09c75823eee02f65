// Package httpapi is Platinum's REST transport (/v1, see api/openapi.yaml).
// Handlers are thin: decode, call one method of the control plane part
// the route belongs to (Deps), encode. Errors become statuses in one place
// (errors.go).
package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/platinum-dev/platinum/api"
	"github.com/platinum-dev/platinum/internal/artifacts"
	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/events"
	"github.com/platinum-dev/platinum/internal/metrics"
	"github.com/platinum-dev/platinum/internal/requestid"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/sessions"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// Deps are the parts of the control plane the handlers call, each wired
// by cmd/ptd.
type Deps struct {
	// Sandboxes is the core: sandboxes, their lifecycle, templates,
	// snapshots, exec and files.
	Sandboxes *controlplane.Service
	// Tenancy authenticates requests and manages orgs, projects, tokens
	// and quotas.
	Tenancy *tenancy.Service
	// Events serves the event feed and webhooks.
	Events *events.Service
	// Artifacts exports and serves artifacts.
	Artifacts *artifacts.Service
	// Sessions runs sessions, warm pools and workspaces.
	Sessions *sessions.Service
	// Region is this ptd's region (ptd serve --region) and Regions every
	// region it knows, its own first: a create naming another region
	// reaches this API only when no router sent it there, and is refused
	// (docs/ARCHITECTURE.md, "Regions").
	Region  string
	Regions []string
}

// API serves the REST API.
type API struct {
	cp  *controlplane.Service
	tn  *tenancy.Service
	ev  *events.Service
	art *artifacts.Service
	ses *sessions.Service
	log *slog.Logger
	mux *http.ServeMux
	// routes are the mounted patterns, in registration order (Routes).
	routes []string
	// serve is the whole chain: request id, metrics, idempotency, router.
	serve http.Handler
	// promHandler serves /metrics (MetricsHandler).
	promHandler http.Handler
	// streams ends open event streams at shutdown (events.go).
	streams streams
	// region and regions are Deps.Region and Deps.Regions.
	region  string
	regions []string
}

// New builds the handler tree over d's parts.
func New(d Deps, logger *slog.Logger) *API {
	cp := d.Sandboxes
	a := &API{cp: cp, tn: d.Tenancy, ev: d.Events, art: d.Artifacts, ses: d.Sessions, region: d.Region, regions: d.Regions, log: logger, mux: http.NewServeMux(), promHandler: metrics.Handler(cp.Collector(), d.Sessions.Collector())}
	var access *slog.Logger
	if logger != nil {
		access = logger.With("component", "http")
	}
	a.serve = requestid.Middleware(metrics.InstrumentLog(access, http.HandlerFunc(a.serveIdempotent)))
	a.public("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	a.public("GET /v1/openapi.json", a.openapi)
	a.handle("GET /metrics", a.serveMetrics)

	a.handle("POST /v1/sandboxes", a.createSandbox)
	a.handle("GET /v1/sandboxes", a.listSandboxes)
	a.handle("GET /v1/sandboxes/{id}", a.getSandbox)
	a.handle("DELETE /v1/sandboxes/{id}", a.deleteSandbox)
	a.handle("PATCH /v1/sandboxes/{id}", a.patchSandbox)
	a.handle("PATCH /v1/sandboxes/{id}/env", a.patchEnv)
	a.handle("PATCH /v1/sandboxes/{id}/network", a.patchNetwork)
	a.handle("GET /v1/sandboxes/{id}/children", a.children)
	a.handle("POST /v1/sandboxes/{id}/resize", a.resize)
	a.handle("GET /v1/sandboxes/{id}/metrics", a.metrics)
	a.handle("GET /v1/sandboxes/{id}/usage", a.usage)
	a.handle("POST /v1/sandboxes/{id}/stop", a.stop)
	a.handle("POST /v1/sandboxes/{id}/pause", a.stop)
	a.handle("POST /v1/sandboxes/{id}/start", a.lifecycleCall(cp.StartWithin, sandbox.StateRunning))
	a.handle("POST /v1/sandboxes/{id}/resume", a.lifecycleCall(cp.StartWithin, sandbox.StateRunning))
	a.handle("POST /v1/sandboxes/{id}/archive", a.lifecycleCall(unqueued(cp.Archive), sandbox.StateArchived))
	a.handle("POST /v1/sandboxes/{id}/snapshots", a.createSnapshot)
	a.handle("GET /v1/sandboxes/{id}/snapshots", a.listSnapshots)
	a.handle("GET /v1/snapshots/{snap}", a.getSnapshot)
	a.handle("DELETE /v1/snapshots/{snap}", a.deleteSnapshot)
	a.handle("POST /v1/sandboxes/{id}/restore", a.restoreSnapshot)
	a.handle("POST /v1/sandboxes/{id}/fork", a.fork)
	a.handle("POST /v1/sandboxes/{id}/backups", a.createBackup)
	a.handle("GET /v1/sandboxes/{id}/backups", a.listBackups)
	a.handle("POST /v1/sandboxes/{id}/exec", a.exec)
	a.handle("POST /v1/sandboxes/{id}/processes", a.startProcess)
	a.handle("GET /v1/sandboxes/{id}/processes", a.listProcesses)
	a.handle("DELETE /v1/sandboxes/{id}/processes/{pid}", a.killProcess)
	a.handle("GET /v1/sandboxes/{id}/processes/{pid}/stream", a.connectProcess)
	a.handle("POST /v1/sandboxes/{id}/processes/{pid}/input", a.processInput)
	a.handle("POST /v1/sandboxes/{id}/processes/{pid}/signal", a.signalProcess)
	a.handle("POST /v1/sandboxes/{id}/processes/{pid}/resize", a.resizeProcess)
	a.handle("POST /v1/sandboxes/{id}/code", a.runCode)
	a.handle("POST /v1/sandboxes/{id}/code/contexts", a.createCodeContext)
	a.handle("GET /v1/sandboxes/{id}/code/contexts", a.listCodeContexts)
	a.handle("DELETE /v1/sandboxes/{id}/code/contexts/{ctx}", a.deleteCodeContext)
	a.handle("POST /v1/sandboxes/{id}/code/contexts/{ctx}/restart", a.restartCodeContext)
	a.handle("POST /v1/sandboxes/{id}/code/contexts/{ctx}/interrupt", a.interruptCodeContext)
	a.handle("GET /v1/sandboxes/{id}/code/executions", a.listCodeExecutions)
	a.handle("DELETE /v1/sandboxes/{id}/code/executions/{exec}", a.deleteCodeExecution)
	a.public("GET /v1/sandboxes/{id}/pty", a.ptyAuth(a.authed(a.pty)).ServeHTTP)
	a.handle("GET /v1/sandboxes/{id}/files", a.download)
	a.handle("PUT /v1/sandboxes/{id}/files", a.upload)
	a.handle("DELETE /v1/sandboxes/{id}/files", a.removeFile)
	a.handle("POST /v1/sandboxes/{id}/files/mkdir", a.mkdir)
	a.handle("GET /v1/sandboxes/{id}/preview-urls/{port}", a.getPreviewURL)
	a.handle("POST /v1/sandboxes/{id}/preview-urls/{port}", a.setPreviewURL)
	a.handle("DELETE /v1/sandboxes/{id}/preview-urls/{port}", a.revokePreviewURL)
	a.handle("GET /v1/templates", a.listTemplates)
	a.handle("GET /v1/templates/{slug}", a.getTemplate)
	a.handle("POST /v1/templates/{slug}/build", a.buildTemplate)
	a.handle("GET /v1/templates/{slug}/versions", a.templateVersions)
	a.handle("POST /v1/templates/{slug}/builds", a.newTemplateVersion)
	a.handle("POST /v1/templates", a.createTemplate)
	a.handle("POST /v1/templates/uploads", a.uploadTemplateFile)
	a.handle("DELETE /v1/templates/{slug}", a.deleteTemplate)
	a.handle("DELETE /v1/templates/{slug}/versions/{version_id}", a.deleteTemplate)
	a.handle("GET /v1/templates/{slug}/builds/{build_id}", a.getTemplateBuild)
	a.handle("GET /v1/templates/{slug}/builds/{build_id}/logs", a.templateBuildLogs)
	a.handle("PUT /v1/registry-credentials/{registry}", a.putRegistryCredential)
	a.handle("GET /v1/registry-credentials", a.listRegistryCredentials)
	a.handle("DELETE /v1/registry-credentials/{registry}", a.deleteRegistryCredential)
	a.handle("POST /v1/sandboxes/{id}/kill", a.kill)
	a.handle("POST /v1/sandboxes/{id}/ttl", a.setTTL)
	a.handle("POST /v1/orgs", a.createOrg)
	a.handle("DELETE /v1/orgs/{id}", a.deleteOrg)
	a.handle("GET /v1/orgs/{id}/quotas", a.getOrgQuota)
	a.handle("PUT /v1/orgs/{id}/quotas", a.setOrgQuota)
	a.handle("POST /v1/projects", a.createProject)
	a.handle("GET /v1/projects", a.listProjects)
	a.handle("GET /v1/projects/{id}", a.getProject)
	a.handle("POST /v1/tokens", a.createToken)
	a.handle("GET /v1/hosts", a.hosts)
	a.handle("POST /v1/hosts/{id}/drain", a.drainHost)
	a.handle("POST /v1/hosts/{id}/undrain", a.undrainHost)
	a.handle("GET /v1/events", a.events)
	a.handle("POST /v1/webhooks", a.createWebhook)
	a.handle("GET /v1/webhooks", a.listWebhooks)
	a.handle("GET /v1/webhooks/{id}", a.getWebhook)
	a.handle("DELETE /v1/webhooks/{id}", a.deleteWebhook)
	a.handle("GET /v1/webhooks/{id}/deliveries", a.webhookDeliveries)
	a.handle("POST /v1/sandboxes/{id}/artifacts", a.createArtifact)
	a.handle("GET /v1/artifacts", a.listArtifacts)
	a.handle("GET /v1/artifacts/{id}", a.getArtifact)
	a.handle("GET /v1/artifacts/{id}/content", a.artifactContent)
	a.handle("DELETE /v1/artifacts/{id}", a.deleteArtifact)
	a.handle("POST /v1/sessions", a.createSession)
	a.handle("GET /v1/sessions", a.listSessions)
	a.handle("GET /v1/sessions/status", a.sessionStatus)
	a.handle("GET /api/sandbox/status", a.sessionStatus)
	a.handle("GET /v1/sessions/{id}", a.getSession)
	a.handle("DELETE /v1/sessions/{id}", a.stopSession)
	a.handle("POST /v1/sessions/{id}/exec", a.viaSession(a.exec))
	a.handle("GET /v1/sessions/{id}/files", a.viaSession(a.download))
	a.handle("PUT /v1/sessions/{id}/files", a.viaSession(a.upload))
	a.handle("DELETE /v1/sessions/{id}/files", a.viaSession(a.removeFile))
	a.handle("POST /v1/sessions/{id}/files/mkdir", a.viaSession(a.mkdir))
	a.handle("GET /v1/pools", a.listPools)
	a.handle("PUT /v1/pools/{template}", a.setPool)
	a.mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		a.writeError(w, r, &apiError{status: http.StatusNotFound, code: "not_found",
			msg: fmt.Sprintf("no route %s %s; see /v1/openapi.json", r.Method, r.URL.Path)})
	})
	return a
}

// ServeHTTP implements http.Handler. Every request gets its id and is
// counted (a no-op when ptd's outer chain did both already); mutating
// calls go through the idempotency layer (idempotency.go) before the
// router.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.serve.ServeHTTP(w, r) }

// Routes lists every pattern the router mounts ("METHOD /path"), for the
// contract test that holds them to api/openapi.yaml.
func (a *API) Routes() []string { return slices.Clone(a.routes) }

// public registers an unauthenticated route.
func (a *API) public(pattern string, h http.HandlerFunc) {
	a.routes = append(a.routes, pattern)
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		metrics.SetRoute(r.Context(), pattern)
		h(w, r)
	})
}

// handlerFunc is a handler that returns its error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p controlplane.Principal) error

type principalKey struct{}

// handle registers an authenticated route.
func (a *API) handle(pattern string, h handlerFunc) {
	a.public(pattern, a.authed(h))
}

// authed authenticates the request's bearer token, then runs h.
func (a *API) authed(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// The idempotency layer may have authenticated the request already.
		p, ok := r.Context().Value(principalKey{}).(controlplane.Principal)
		if !ok {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			var err error
			if p, err = a.tn.Authenticate(r.Context(), strings.TrimSpace(tok)); err != nil {
				a.writeError(w, r, err)
				return
			}
		}
		// h gets p itself; the request is not copied to carry it (nothing
		// below reads principalKey, which only the idempotency layer sets).
		if err := h(w, r, p); err != nil {
			a.writeError(w, r, err)
		}
	}
}

func (a *API) openapi(w http.ResponseWriter, r *http.Request) {
	b, err := api.OpenAPIJSON()
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// maxJSONBody bounds JSON request bodies (env may be up to 256 KiB).
const maxJSONBody = 1 << 20

// decodeJSON strictly decodes one JSON object: unknown fields, wrong types
// and trailing data are 400 invalid_request; an empty body decodes to the
// zero value when allowEmpty.
func decodeJSON(r *http.Request, v any, allowEmpty bool) error {
	return decodeJSONLimit(r, v, allowEmpty, maxJSONBody)
}

// decodeJSONLimit is decodeJSON for a body of at most limit bytes.
func decodeJSONLimit(r *http.Request, v any, allowEmpty bool, limit int64) error {
	body := http.MaxBytesReader(nil, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) && allowEmpty {
		return nil
	}
	if err != nil {
		var te *json.UnmarshalTypeError
		var mbe *http.MaxBytesError
		var ae *apiError
		switch {
		case errors.As(err, &ae):
			return ae
		case errors.As(err, &te):
			return badRequest(fmt.Sprintf("field %q must be %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value), te.Field)
		case errors.As(err, &mbe):
			return &apiError{status: http.StatusRequestEntityTooLarge, code: "payload_too_large", msg: fmt.Sprintf("request body is over %d bytes", limit)}
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return badRequest(fmt.Sprintf("unknown field %q; see /v1/openapi.json", f), f)
		default:
			return badRequest("malformed JSON body: "+err.Error(), "")
		}
	}
	if dec.More() {
		return badRequest("malformed JSON body: trailing data after the object", "")
	}
	return nil
}

func jsonKind(k string) string {
	switch k {
	case "float64", "float32", "int", "int64", "int32":
		return "a number"
	case "map", "struct":
		return "an object"
	case "slice":
		return "an array"
	}
	return "a " + k
}
