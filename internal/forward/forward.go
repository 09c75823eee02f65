// Package forward makes every ptd of a platform an entry point for every
// sandbox (docs/ARCHITECTURE.md, "Many hosts"): a request that names a
// sandbox (or a session, which holds one) placed on another host is sent
// on to that host's ptd, and a create (of a sandbox, a session, a
// template build) is placed on the host with the most free memory among
// those that take new sandboxes and run its runtime class. It reads the shared store
// (sandbox placement, host records, reservations) and nothing else of the
// control plane, so it sits in front of every surface (/v1, E2B, Daytona)
// without knowing their routes.
package forward

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/hostreg"
	"github.com/platinum-dev/platinum/internal/requestid"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/upstream"
)

// Header marks a request one ptd sent to another: the receiver serves it
// itself, so a request crosses at most one hop. It names the sender's host.
const Header = "Pt-Forwarded-By"

// Store is what forwarding reads of the shared store.
type Store interface {
	GetSandbox(ctx context.Context, orgID, id string) (sandbox.Sandbox, error)
	// GetSession reads a session, whose requests go to its sandbox's host.
	GetSession(ctx context.Context, orgID, id string) (store.Session, error)
	// GetTemplateBuild reads a build, whose log a running one's host
	// streams live (buildHost).
	GetTemplateBuild(ctx context.Context, orgID, id string) (store.TemplateBuild, error)
	ListHosts(ctx context.Context) ([]store.HostRecord, error)
	HostUsage(ctx context.Context, states ...sandbox.State) (map[string]store.Usage, error)
}

// Router forwards requests to the ptd of the host they belong to.
type Router struct {
	store Store
	self  string
	// local is false on a ptd that runs no sandboxes (--role=api): no
	// create is served here, and none is forwarded to it.
	local bool
	log   *slog.Logger
	// fresh is how long a read of the host list is used.
	fresh time.Duration
	proxy *httputil.ReverseProxy

	mu     sync.Mutex
	hosts  []store.HostRecord
	readAt time.Time
}

// New returns a Router for the ptd whose host is self; local is false
// when that ptd runs no sandboxes.
func New(st Store, self string, local bool, log *slog.Logger) *Router {
	r := &Router{store: st, self: self, local: local, log: log, fresh: time.Second}
	r.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(pr.In.Context().Value(targetKey{}).(*url.URL))
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			pr.Out.Header.Set(Header, self)
		},
		// A gRPC call that came over HTTP/2 (a relayed preview) goes on
		// over h2c, which every ptd's API listener speaks; the rest over
		// HTTP/1.1.
		Transport: upstream.ByProtocol{H1: http.DefaultTransport, H2: upstream.H2C(&http.Transport{IdleConnTimeout: 90 * time.Second})},
		// Streams (exec output, events, process and PTY traffic) pass
		// through as they are written.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			if f, ok := req.Context().Value(failKey{}).(*error); ok {
				*f = err
				return
			}
			r.log.WarnContext(req.Context(), "forward", "to", req.URL.Host, "path", req.URL.Path, "err", err)
			writeUnavailable(w, req, "the sandbox's host does not answer ("+err.Error()+"); retry in a few seconds")
		},
	}
	return r
}

type (
	targetKey struct{}
	failKey   struct{}
)

// Wrap returns next behind the router: a create is placed, a request for
// another host's sandbox is forwarded, the rest is served by next.
func (r *Router) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.local && !r.others(req.Context(), r.fresh) {
			// Alone with its host (as far as the last read knows): a ptd
			// that runs no sandboxes reads on instead, since it serves
			// no create and may have missed a host that came back. A
			// create reads the list again first: a host that joined
			// within the last read's life takes it when this one is
			// draining, rather than this one refusing it as if no host
			// could (one store read beside the create's own writes).
			if _, ok := createFor(req); !ok || !r.others(req.Context(), 0) {
				next.ServeHTTP(w, req)
				return
			}
		}
		if req.Header.Get(Header) != "" {
			// Sent by a peer: served here, unless the sandbox is another
			// live host's after all (it moved, or the header is a
			// client's): never drive a sandbox another host runs.
			if id := r.sandboxOf(req); id != "" {
				if h, ok := r.owner(req.Context(), id); ok {
					writeUnavailable(w, req, "sandbox "+id+" is on host "+h.ID+"; retry")
					return
				}
			}
			next.ServeHTTP(w, req)
			return
		}
		if c, ok := createFor(req); ok {
			r.place(w, req, next, c)
			return
		}
		if h, ok := r.buildHost(req); ok {
			r.followBuild(w, req, next, h)
			return
		}
		id := r.sandboxOf(req)
		if id == "" {
			next.ServeHTTP(w, req)
			return
		}
		h, ok := r.owner(req.Context(), id)
		if !ok {
			next.ServeHTTP(w, req)
			return
		}
		r.forward(w, req, h)
	})
}

// others reports whether another host can be forwarded to at all, from
// the host list read at most maxAge ago (fresh, but for creates): a ptd
// alone on its store serves everything itself at the cost of nothing but
// that read.
func (r *Router) others(ctx context.Context, maxAge time.Duration) bool {
	for _, h := range r.readHosts(ctx, maxAge) {
		if h.ID != r.self && h.State != store.HostLost && h.URL != "" {
			return true
		}
	}
	return false
}

// readHosts is the host list, read again when the last read is older
// than maxAge.
func (r *Router) readHosts(ctx context.Context, maxAge time.Duration) []store.HostRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.readAt) < maxAge {
		return r.hosts
	}
	hs, err := r.store.ListHosts(ctx)
	if err != nil {
		r.log.WarnContext(ctx, "forward: list hosts", "err", err)
		return r.hosts // the last list read, until the store answers
	}
	r.hosts, r.readAt = hs, time.Now()
	return hs
}

// owner is the host a request for sandbox id goes to, when that is not
// this one: the sandbox is placed there and the host is not lost. A lost
// host's sandboxes are answered here (their records say host_lost), where
// a start may take one over from its stop snapshot; a ptd that runs no
// sandboxes sends them to the host a create would go to instead, which
// can.
func (r *Router) owner(ctx context.Context, id string) (store.HostRecord, bool) {
	sb, err := r.store.GetSandbox(ctx, "", id)
	if err != nil || sb.HostID == "" || sb.HostID == r.self {
		return store.HostRecord{}, false
	}
	// Before answering here, the host list is read again: the host may
	// have come back (or joined) since the last read.
	lost := false
	for _, maxAge := range []time.Duration{r.fresh, 0} {
		for _, h := range r.readHosts(ctx, maxAge) {
			if h.ID == sb.HostID && h.State != store.HostLost && h.URL != "" {
				return h, true
			}
			lost = lost || (h.ID == sb.HostID && h.State == store.HostLost)
		}
	}
	if lost && !r.local {
		if hs := r.Candidates(ctx, sb.Runtime); len(hs) > 0 {
			return hs[0], true
		}
	}
	return store.HostRecord{}, false
}

// Peer is the host that runs sandbox id when that is another live host
// of the store, for the listeners other than the API's (the preview proxy,
// the SSH gateway), which send such a sandbox's traffic on to that host's
// ptd. False when this ptd is alone on its store, or the sandbox is this
// host's, unplaced, unknown or on a lost host (answered here, as the API
// does).
func (r *Router) Peer(ctx context.Context, id string) (store.HostRecord, bool) {
	if !r.others(ctx, r.fresh) {
		return store.HostRecord{}, false
	}
	return r.owner(ctx, id)
}

// Relay sends req, for sandbox id, on to the ptd of the host that runs it
// with the header mark set (so that ptd's API listener hands it to the
// surface named by mark), and reports whether it did: false means req is
// to be served here. A request a peer already sent on (Header set) is
// served here, unless the sandbox is another live host's after all: then
// it answers 503 unavailable, as forwarded API requests do.
func (r *Router) Relay(w http.ResponseWriter, req *http.Request, id, mark string) bool {
	h, ok := r.Peer(req.Context(), id)
	if !ok {
		return false
	}
	if req.Header.Get(Header) != "" {
		writeUnavailable(w, req, "sandbox "+id+" is on host "+h.ID+"; retry")
		return true
	}
	out := req.Clone(req.Context())
	out.Header.Set(mark, "1")
	r.forward(w, out, h)
	return true
}

func (r *Router) forward(w http.ResponseWriter, req *http.Request, h store.HostRecord) {
	u, err := url.Parse(h.URL)
	if err != nil {
		writeUnavailable(w, req, "host "+h.ID+" has no usable URL")
		return
	}
	r.proxy.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), targetKey{}, u)))
}

// createRoute is a route that makes something only a host can run: a
// sandbox, a session (its sandbox), a template build (its build sandbox
// and the version's files). Such a request is placed on a host as a
// sandbox create is (Candidates), whichever ptd it reached.
type createRoute struct {
	// path is the route's segments; "*" matches any one.
	path []string
	// runtime is the runtime class the body asks for ("": any).
	runtime func(body []byte) string
}

// creates are the create routes of every surface (all POST).
var creates = []createRoute{
	{path: segments("/v1/sandboxes"), runtime: bodyRuntime},
	{path: segments("/sandboxes"), runtime: bodyRuntime},           // E2B
	{path: segments("/daytona/api/sandbox"), runtime: bodyRuntime}, // Daytona
	{path: segments("/v1/sessions"), runtime: noRuntime},           // the session's sandbox
	{path: segments("/v1/templates"), runtime: settingsRuntime},    // a custom template's build
	{path: segments("/v1/templates/*/builds"), runtime: noRuntime}, // a platform template's new version
	{path: segments("/v1/templates/*/build"), runtime: noRuntime},  // the same, older route
}

func segments(path string) []string { return strings.Split(strings.Trim(path, "/"), "/") }

// createFor is the create route req is for, if any.
func createFor(req *http.Request) (createRoute, bool) {
	if req.Method != http.MethodPost {
		return createRoute{}, false
	}
	got := segments(req.URL.Path)
	for _, c := range creates {
		if slices.EqualFunc(c.path, got, func(want, seg string) bool { return want == seg || want == "*" && seg != "" }) {
			return c, true
		}
	}
	return createRoute{}, false
}

// bodyRuntime is a sandbox create's "runtime"; a body that does not
// parse is the API's to refuse.
func bodyRuntime(body []byte) string {
	var want struct {
		Runtime string `json:"runtime"`
	}
	json.Unmarshal(body, &want)
	return want.Runtime
}

// settingsRuntime is a custom template's "settings.runtime", the class
// its sandboxes run (the host checks it is one of its own).
func settingsRuntime(body []byte) string {
	var want struct {
		Settings struct {
			Runtime string `json:"runtime"`
		} `json:"settings"`
	}
	json.Unmarshal(body, &want)
	return want.Settings.Runtime
}

func noRuntime([]byte) string { return "" }

// maxCreateBody bounds what is read of a create's body to place it (a
// template's Dockerfile may take 2 MiB); a larger body is served here,
// where the API refuses it.
const maxCreateBody = 3 << 20

// place serves a create on the host that placement picks, trying the next
// one when a host cannot be reached at all (nothing was sent, so nothing
// can have been created there).
func (r *Router) place(w http.ResponseWriter, req *http.Request, next http.Handler, c createRoute) {
	body, err := io.ReadAll(io.LimitReader(req.Body, maxCreateBody+1))
	req.Body.Close()
	if err != nil || len(body) > maxCreateBody {
		req.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, req)
		return
	}
	for _, h := range r.Candidates(req.Context(), c.runtime(body)) {
		req.Body = io.NopCloser(bytes.NewReader(body))
		if h.ID == r.self {
			next.ServeHTTP(w, req)
			return
		}
		u, err := url.Parse(h.URL)
		if err != nil {
			continue
		}
		var failed error
		ctx := context.WithValue(context.WithValue(req.Context(), targetKey{}, u), failKey{}, &failed)
		r.proxy.ServeHTTP(w, req.WithContext(ctx))
		if failed == nil {
			return
		}
		if !unreached(failed) {
			writeUnavailable(w, req, "host "+h.ID+" failed mid-create ("+failed.Error()+"); see what it made (list) before you retry, or retry with the same Idempotency-Key")
			return
		}
		r.log.WarnContext(req.Context(), "forward: host unreachable, placing the create elsewhere", "host", h.ID, "err", failed)
	}
	// No host takes it: this ptd answers, with its own refusal when its
	// host takes nothing new either; one that runs no sandboxes refuses.
	if !r.local {
		WriteError(w, req, "capacity", "no host takes new sandboxes (every one is draining, lost or unreachable); create again after Retry-After",
			map[string]any{"reason": "no_host"})
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	next.ServeHTTP(w, req)
}

// unreached reports whether a proxy error happened before the request
// left: the connection was never made.
func unreached(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Candidates are the hosts a create may go to, best first: active (not
// draining or lost), reachable, running runtime (any class when empty),
// ordered by free memory (registered RAM less what live sandboxes
// reserve), then this host (no hop), then fewer live sandboxes, then ID.
// The host list is read for each create, so a drain binds the next one.
func (r *Router) Candidates(ctx context.Context, runtime string) []store.HostRecord {
	use, err := r.store.HostUsage(ctx, hostreg.Live...)
	if err != nil {
		r.log.WarnContext(ctx, "forward: host usage", "err", err)
		return nil
	}
	type scored struct {
		h    store.HostRecord
		free int
		n    int
	}
	var out []scored
	for _, h := range r.readHosts(ctx, 0) {
		if h.State != store.HostActive || (h.URL == "" && h.ID != r.self) || (h.ID == r.self && !r.local) {
			continue
		}
		var c hostreg.Capacity
		if json.Unmarshal(h.Capacity, &c) != nil {
			continue
		}
		if !c.Runs(runtime) {
			continue
		}
		u := use[h.ID]
		out = append(out, scored{h: h, free: c.RAMMB - u.RAMMB, n: u.Sandboxes})
	}
	slices.SortFunc(out, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.free, a.free), boolFirst(a.h.ID == r.self, b.h.ID == r.self),
			cmp.Compare(a.n, b.n), cmp.Compare(a.h.ID, b.h.ID))
	})
	hs := make([]store.HostRecord, len(out))
	for i, s := range out {
		hs[i] = s.h
	}
	return hs
}

func boolFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// heldRoutes are the routes naming a record that holds a sandbox:
// their requests go to that sandbox's host, as the sandbox's own do.
var heldRoutes = []struct {
	prefix, idPrefix string
	sandbox          func(ctx context.Context, st Store, id string) string
}{
	{"/v1/sessions/", sandbox.PrefixSession, func(ctx context.Context, st Store, id string) string {
		ses, err := st.GetSession(ctx, "", id)
		if err != nil {
			return "" // unknown: the API answers it
		}
		return ses.SandboxID // "" until a cold session's sandbox is made
	}},
}

// buildLogs is the route of a template build's log, which its building
// host serves as the lines come; any other ptd reads it from the store,
// where the building ptd writes it every 2 s.
var buildLogs = segments("/v1/templates/*/builds/*/logs")

// buildHost is the host a request for a running build's log goes to: the
// host the build recorded when it started (its request's "host", which
// controlplane writes) when that is another live host. A finished build's
// log is whole in the store, and a build of this host, of a lost one or
// naming none is answered here.
func (r *Router) buildHost(req *http.Request) (store.HostRecord, bool) {
	got := segments(req.URL.Path)
	if req.Method != http.MethodGet || len(got) != len(buildLogs) ||
		!slices.EqualFunc(buildLogs, got, func(want, seg string) bool { return want == seg || want == "*" && seg != "" }) {
		return store.HostRecord{}, false
	}
	id := got[4]
	if !sandbox.ValidID(sandbox.PrefixTemplateBuild, id) {
		return store.HostRecord{}, false
	}
	b, err := r.store.GetTemplateBuild(req.Context(), "", id)
	if err != nil || b.Status != store.BuildRunning {
		return store.HostRecord{}, false // unknown or another org's: the API answers it
	}
	var rec struct {
		Host string `json:"host"`
	}
	if json.Unmarshal([]byte(b.Request), &rec) != nil || rec.Host == "" || rec.Host == r.self {
		return store.HostRecord{}, false
	}
	for _, h := range r.readHosts(req.Context(), r.fresh) {
		if h.ID == rec.Host && h.State != store.HostLost && h.URL != "" {
			return h, true
		}
	}
	return store.HostRecord{}, false
}

// followBuild sends a running build's log request on to its host h. A
// host that cannot be reached at all leaves it to next, which reads the
// log from the store; one that fails once reached answers 503.
func (r *Router) followBuild(w http.ResponseWriter, req *http.Request, next http.Handler, h store.HostRecord) {
	u, err := url.Parse(h.URL)
	if err != nil {
		next.ServeHTTP(w, req)
		return
	}
	var failed error
	ctx := context.WithValue(context.WithValue(req.Context(), targetKey{}, u), failKey{}, &failed)
	r.proxy.ServeHTTP(w, req.WithContext(ctx))
	switch {
	case failed == nil:
	case unreached(failed):
		r.log.WarnContext(req.Context(), "forward: a build's host does not answer; its log is read from the store", "host", h.ID, "err", failed)
		next.ServeHTTP(w, req)
	default:
		writeUnavailable(w, req, "the build's host does not answer ("+failed.Error()+"); retry in a few seconds")
	}
}

// sandboxOf is the sandbox a request is for: the one it names
// (SandboxOf), else the one held by the record it names (heldRoutes).
func (r *Router) sandboxOf(req *http.Request) string {
	if id := SandboxOf(req); id != "" {
		return id
	}
	for _, hr := range heldRoutes {
		rest, ok := strings.CutPrefix(req.URL.Path, hr.prefix)
		if !ok {
			continue
		}
		id, _, _ := strings.Cut(rest, "/")
		if sandbox.ValidID(hr.idPrefix, id) {
			return hr.sandbox(req.Context(), r.store, id)
		}
	}
	return ""
}

// SandboxOf is the sandbox a request is for: E2B's E2b-Sandbox-Id header
// (envd traffic), else the first path segment that is a sandbox ID
// (/v1/sandboxes/<id>/…, E2B's /sandboxes/<id>/…, Daytona's
// /daytona/api/sandbox/<id>/… and /daytona/toolbox/<id>/…). E2B's
// "<id>-<client>" form counts as <id>. Empty when it names none.
func SandboxOf(req *http.Request) string {
	if id := req.Header.Get("E2b-Sandbox-Id"); id != "" {
		return sandboxID(id)
	}
	for seg := range strings.SplitSeq(req.URL.Path, "/") {
		if strings.HasPrefix(seg, sandbox.PrefixSandbox) {
			return sandboxID(seg)
		}
	}
	return ""
}

func sandboxID(s string) string {
	id, _, _ := strings.Cut(s, "-")
	if !strings.HasPrefix(id, sandbox.PrefixSandbox) {
		return ""
	}
	return id
}

// writeUnavailable answers 503 unavailable.
func writeUnavailable(w http.ResponseWriter, req *http.Request, msg string) {
	WriteError(w, req, "unavailable", msg, nil)
}

// WriteError answers 503 with Retry-After in /v1's error shape, which the
// E2B and Daytona SDKs read as a retryable server error too; extra fields
// join code and error.
func WriteError(w http.ResponseWriter, req *http.Request, code, msg string, extra map[string]any) {
	body := map[string]any{"code": code, "error": msg}
	for k, v := range extra {
		body[k] = v
	}
	if id := requestid.From(req.Context()); id != "" {
		body["request_id"] = id
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "5")
	w.WriteHeader(http.StatusServiceUnavailable)
	json.NewEncoder(w).Encode(body)
}
