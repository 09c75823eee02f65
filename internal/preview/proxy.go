package preview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/upstream"
)

// Names of the token's carriers.
const (
	// HeaderToken carries the preview token on API-style clients.
	HeaderToken = "X-Pt-Preview-Token"
	// HeaderTokenDaytona is the same token under the name Daytona's
	// clients send (docs/daytona.md).
	HeaderTokenDaytona = "X-Daytona-Preview-Token"
	// QueryToken carries it once in a browser link; the proxy moves it
	// into CookieToken and redirects to the URL without it.
	QueryToken = "pt_token"
	// CookieToken holds it for a browser after the first visit.
	CookieToken = "pt_preview_token"
	// HeaderReason names why a sandbox was not reached (e.g.
	// auto-resume-disabled).
	HeaderReason = "X-Pt-Reason"
	// ReasonAutoResumeDisabled is the reason of a request to a stopped
	// sandbox whose auto_resume is off.
	ReasonAutoResumeDisabled = "auto-resume-disabled"
	// HeaderRelay marks a preview request one ptd sent on to the ptd of
	// the host that runs its sandbox, at that ptd's API listener, which
	// hands it to its own preview proxy (docs/ARCHITECTURE.md, "Many
	// hosts"). It grants nothing: the proxy there checks the token.
	HeaderRelay = "Pt-Preview-Relay"
)

// Peers sends a request on to the ptd of the host that runs its sandbox
// when that is another host of the store (*forward.Router implements it).
type Peers interface {
	// Relay serves r by sending it on, with mark set, when sandbox id is
	// another live host's, and reports whether it did.
	Relay(w http.ResponseWriter, r *http.Request, id, mark string) bool
}

// Backend is what the proxy needs of the control plane
// (*controlplane.Service implements it).
type Backend interface {
	// PreviewTarget returns the live sandbox id (any org), ErrNotFound
	// when there is none.
	PreviewTarget(ctx context.Context, id string) (sandbox.Sandbox, error)
	// AutoResume brings the sandbox to running within timeout;
	// controlplane.ErrAutoResumeDisabled when its auto_resume is off.
	AutoResume(ctx context.Context, id string, timeout time.Duration) (sandbox.Sandbox, error)
	// Touch records activity for the auto-stop timer.
	Touch(id string)
}

// Config tunes the proxy.
type Config struct {
	// Domain is the preview domain: host-form URLs are
	// <port>-<id>.<Domain>. "localhost" works in browsers with no DNS.
	Domain string
	// Scheme and URLPort are what URLs handed out say (the listener's
	// port, or that of a front proxy); URLPort 0 leaves the port out.
	Scheme  string
	URLPort int
	// ResumeTimeout bounds an auto-resume together with the wait for the
	// port to answer.
	ResumeTimeout time.Duration
	// ActivityInterval is how often sandboxes with requests in flight
	// (WebSockets, long streams) are marked active, so auto-stop never
	// cuts a connection that is in use.
	ActivityInterval time.Duration
}

// DefaultConfig returns the defaults of `ptd serve`.
func DefaultConfig() Config {
	return Config{Domain: "localhost", Scheme: "http", URLPort: 7071, ResumeTimeout: 30 * time.Second, ActivityInterval: 30 * time.Second}
}

// ConfigError names the invalid field of a Config.
type ConfigError struct {
	Field string
	Err   error
}

// Error implements error.
func (e *ConfigError) Error() string { return fmt.Sprintf("preview config %s: %v", e.Field, e.Err) }

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.Err }

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case c.Domain == "" || strings.ContainsAny(c.Domain, "/: ") || strings.HasPrefix(c.Domain, "."):
		return &ConfigError{"Domain", errors.New("must be a DNS name such as localhost or preview.example.com")}
	case c.Scheme != "http" && c.Scheme != "https":
		return &ConfigError{"Scheme", errors.New("must be http or https")}
	case c.URLPort < 0 || c.URLPort > 65535:
		return &ConfigError{"URLPort", errors.New("must be 0-65535")}
	case c.ResumeTimeout <= 0:
		return &ConfigError{"ResumeTimeout", errors.New("must be positive")}
	case c.ActivityInterval <= 0:
		return &ConfigError{"ActivityInterval", errors.New("must be positive")}
	}
	return nil
}

// Server is the preview proxy. It is an http.Handler; Serve runs it on a
// listener with the settings long-lived streams need.
type Server struct {
	cfg    Config
	signer *Signer
	be     Backend
	log    *slog.Logger
	proxy  *httputil.ReverseProxy
	flight flight
	now    func() time.Time
	// wg owns the auto-resume goroutines; Serve waits for them.
	wg sync.WaitGroup

	activeMu sync.Mutex
	active   map[string]int // requests in flight per sandbox

	// peers, when set, takes the requests for other hosts' sandboxes.
	peers Peers
}

// SetPeers makes the proxy send requests for sandboxes of other hosts of
// the store on to their ptds, where the token check, the auto-resume and
// the port happen. Without it (a ptd alone on its store) every sandbox is
// served here.
func (s *Server) SetPeers(p Peers) { s.peers = p }

// New builds the proxy.
func New(cfg Config, signer *Signer, be Backend, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, signer: signer, be: be, log: logger, now: time.Now, active: map[string]int{}}
	s.flight.calls = map[string]*call{}
	tr := &http.Transport{
		DialContext:         upstream.Dial(&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}),
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		// Bodies pass through as the sandbox encoded them.
		DisableCompression: true,
		ReadBufferSize:     256 << 10,
		WriteBufferSize:    256 << 10,
	}
	// gRPC needs HTTP/2 end to end: a gRPC call that reached the proxy
	// over HTTP/2 goes to the sandbox over h2c (upstream.ByProtocol).
	h2 := upstream.H2C(&http.Transport{
		DialContext:        tr.DialContext,
		IdleConnTimeout:    90 * time.Second,
		DisableCompression: true,
	})
	s.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u, _ := pr.In.Context().Value(upstreamKey{}).(hop)
			pr.SetXForwarded()
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", u.pool, u.addr
			if u.path != "" {
				pr.Out.URL.Path, pr.Out.URL.RawPath = u.path, u.rawPath
			}
		},
		Transport: upstream.ByProtocol{H1: tr, H2: h2},
		// No periodic flush for bodies of known length (a download goes
		// out in buffer-sized writes). ReverseProxy itself flushes every
		// write at once for text/event-stream and for bodies of unknown
		// length (chunked progress, long polls, gRPC streams), so those
		// arrive as they are written (TestStreamingAndH2C).
		FlushInterval: 0,
		BufferPool:    bufferPool{},
		ErrorLog:      slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				return // the client went away
			}
			s.log.Debug("preview upstream", "path", r.URL.Path, "err", err)
			writeError(w, http.StatusBadGateway, "bad_gateway", "the sandbox's port did not answer: "+err.Error(), nil)
		},
	}
	return s, nil
}

// Issuer signs tokens and renders URLs for the control plane. It is apart
// from Server because the control plane needs it before the proxy (which
// needs the control plane) exists.
type Issuer struct {
	cfg    Config
	signer *Signer
}

var _ controlplane.PreviewIssuer = (*Issuer)(nil)

// NewIssuer returns the issuer of a proxy configured with cfg and signer.
func NewIssuer(cfg Config, signer *Signer) *Issuer { return &Issuer{cfg: cfg, signer: signer} }

// Issue signs a token and renders the URLs of a sandbox's port.
func (s *Issuer) Issue(sandboxID string, port int, gen int64, expires time.Time) controlplane.PreviewURL {
	host := s.cfg.Domain
	if s.cfg.URLPort != 0 && !(s.cfg.Scheme == "http" && s.cfg.URLPort == 80) && !(s.cfg.Scheme == "https" && s.cfg.URLPort == 443) {
		host += ":" + strconv.Itoa(s.cfg.URLPort)
	}
	u := controlplane.PreviewURL{
		SandboxID: sandboxID, Port: port,
		URL:     fmt.Sprintf("%s://%s.%s/", s.cfg.Scheme, Label(sandboxID, port), host),
		PathURL: fmt.Sprintf("%s://%s/%s/%d/", s.cfg.Scheme, host, sandboxID, port),
		Token:   s.signer.Sign(Claims{SandboxID: sandboxID, Port: port, Gen: gen, Expires: expires}),
	}
	if !expires.IsZero() {
		e := expires.UTC()
		u.ExpiresAt = &e
	}
	return u
}

// Serve serves the proxy on ln until ctx ends. It has no read or write
// timeout (streams and WebSockets live as long as their peers want), only
// a bound on reading request headers; clients may speak HTTP/1.1 or
// HTTP/2 with prior knowledge (h2c).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		Protocols:         &protos,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	tick := time.NewTicker(s.cfg.ActivityInterval)
	defer tick.Stop()
	for {
		select {
		case err := <-errc:
			return err
		case <-tick.C:
			s.touchActive()
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
			srv.Close() // hijacked (WebSocket) and streaming connections
			<-errc
			s.wg.Wait() // auto-resumes are bounded by ResumeTimeout
			return nil
		}
	}
}

type upstreamKey struct{}

// hop is where one request goes: pool is addr's upstream.Host name.
type hop struct {
	pool, addr, path, rawPath string
}

// ServeHTTP routes, checks the token, resumes the sandbox when needed and
// forwards.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, ok := parseHost(r.Host, s.cfg.Domain)
	fwdPath := ""
	if !ok {
		if t, fwdPath, ok = parsePath(r.URL.Path); !ok {
			s.deny(w)
			return
		}
	}
	if s.peers != nil {
		// Another host's sandbox: its ptd checks the token (signed there),
		// resumes it and reaches its port. Uploads stream both ways.
		_ = http.NewResponseController(w).EnableFullDuplex()
		if s.peers.Relay(w, r, t.SandboxID, HeaderRelay) {
			return
		}
	}
	tok, fromQuery := s.token(r)
	ctx := r.Context()
	sb, err := s.be.PreviewTarget(ctx, t.SandboxID)
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		s.log.Error("preview lookup", "sandbox", t.SandboxID, "err", err)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "preview lookup failed; retry", nil)
		return
	}
	if err != nil || !s.allowed(sb, t.Port, tok) {
		s.deny(w)
		return
	}
	if fromQuery {
		s.setCookie(w, t, tok)
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			q := r.URL.Query()
			q.Del(QueryToken)
			loc := r.URL.EscapedPath()
			if enc := q.Encode(); enc != "" {
				loc += "?" + enc
			}
			http.Redirect(w, r, loc, http.StatusTemporaryRedirect)
			return
		}
	}
	if sb.State != sandbox.StateRunning {
		if sb, err = s.resume(ctx, t); err != nil {
			s.resumeError(w, r, t, err)
			return
		}
	}
	s.forward(w, r, sb, t.Port, t.Prefix, fwdPath)
}

// ForwardPort proxies r unchanged to a port of a running sandbox, counting
// it as activity: for transports that authenticated the request
// themselves (E2B's E2b-Sandbox-Port routing).
func (s *Server) ForwardPort(w http.ResponseWriter, r *http.Request, sb sandbox.Sandbox, port int) {
	s.forward(w, r, sb, port, "", "")
}

func (s *Server) forward(w http.ResponseWriter, r *http.Request, sb sandbox.Sandbox, port int, prefix, fwdPath string) {
	s.begin(sb.ID)
	defer s.end(sb.ID)
	addr := net.JoinHostPort(sb.Address, strconv.Itoa(port))
	u := hop{pool: upstream.Host(sb, addr), addr: addr}
	if prefix != "" {
		u.path = fwdPath
		if raw := strings.TrimPrefix(r.URL.EscapedPath(), prefix); raw != "" && raw != fwdPath {
			u.rawPath = raw
		}
	}
	out := r.WithContext(context.WithValue(r.Context(), upstreamKey{}, u))
	stripToken(out)
	// Over HTTP/1.1 net/http closes an unread request body once the
	// response starts; an upload the sandbox answers early would be cut.
	_ = http.NewResponseController(w).EnableFullDuplex()
	s.proxy.ServeHTTP(w, out)
}

// token returns the request's preview token: the header, else the query
// parameter (fromQuery), else the cookie.
func (s *Server) token(r *http.Request) (tok string, fromQuery bool) {
	if tok = r.Header.Get(HeaderToken); tok != "" {
		return tok, false
	}
	if tok = r.Header.Get(HeaderTokenDaytona); tok != "" {
		return tok, false
	}
	if tok = r.URL.Query().Get(QueryToken); tok != "" {
		return tok, true
	}
	if c, err := r.Cookie(CookieToken); err == nil {
		return c.Value, false
	}
	return "", false
}

// allowed is the token check: a public port, or a token signed for this
// sandbox and port at the port's current generation, unexpired.
func (s *Server) allowed(sb sandbox.Sandbox, port int, tok string) bool {
	if sb.Preview.IsPublic(port) {
		return true
	}
	if tok == "" {
		return false
	}
	c, err := s.signer.Verify(tok, s.now())
	return err == nil && c.SandboxID == sb.ID && c.Port == port && c.Gen == sb.Preview.Generation(port)
}

// denyMessage is the one answer to every request that fails the token
// check, whether or not the sandbox exists.
const denyMessage = "no preview is reachable at this address with this token: send the preview token from GET /v1/sandboxes/{id}/preview-urls/{port} in X-Pt-Preview-Token or ?pt_token="

func (s *Server) deny(w http.ResponseWriter) {
	writeError(w, http.StatusUnauthorized, "preview_unauthorized", denyMessage, nil)
}

func (s *Server) setCookie(w http.ResponseWriter, t target, tok string) {
	c := &http.Cookie{Name: CookieToken, Value: tok, Path: t.Prefix + "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: s.cfg.Scheme == "https"}
	if cl, err := s.signer.Verify(tok, s.now()); err == nil && !cl.Expires.IsZero() {
		c.Expires = cl.Expires
	}
	http.SetCookie(w, c)
}

// stripToken removes the preview token from what the sandbox sees.
func stripToken(r *http.Request) {
	r.Header.Del(HeaderToken)
	r.Header.Del(HeaderTokenDaytona)
	if r.URL.RawQuery != "" && strings.Contains(r.URL.RawQuery, QueryToken) {
		q := r.URL.Query()
		if q.Has(QueryToken) {
			q.Del(QueryToken)
			u := *r.URL
			u.RawQuery = q.Encode()
			r.URL = &u
		}
	}
	if cs := r.Cookies(); len(cs) > 0 {
		var keep []string
		found := false
		for _, c := range cs {
			if c.Name == CookieToken {
				found = true
				continue
			}
			keep = append(keep, c.String())
		}
		if found {
			r.Header.Del("Cookie")
			if len(keep) > 0 {
				r.Header.Set("Cookie", strings.Join(keep, "; "))
			}
		}
	}
}

// resume auto-resumes the sandbox (one start for concurrent requests) and
// waits until its port accepts connections, within ResumeTimeout.
func (s *Server) resume(ctx context.Context, t target) (sandbox.Sandbox, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ResumeTimeout)
	defer cancel()
	sb, err := s.flight.do(ctx, &s.wg, t.SandboxID, func() (sandbox.Sandbox, error) {
		// Detached: the first request going away must not abort the
		// start the others wait for.
		return s.be.AutoResume(context.WithoutCancel(ctx), t.SandboxID, s.cfg.ResumeTimeout)
	})
	if err != nil {
		return sb, err
	}
	addr := net.JoinHostPort(sb.Address, strconv.Itoa(t.Port))
	d := net.Dialer{Timeout: time.Second}
	for wait := 2 * time.Millisecond; ; wait = min(wait*2, 100*time.Millisecond) {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return sb, nil
		}
		select {
		case <-ctx.Done():
			return sb, fmt.Errorf("port %d did not answer: %w", t.Port, ctx.Err())
		case <-time.After(wait):
		}
	}
}

func (s *Server) resumeError(w http.ResponseWriter, r *http.Request, t target, err error) {
	var se *controlplane.StateError
	switch {
	case errors.Is(err, controlplane.ErrAutoResumeDisabled):
		w.Header().Set(HeaderReason, ReasonAutoResumeDisabled)
		writeError(w, http.StatusNotFound, "sandbox_stopped",
			"the sandbox is stopped and its auto_resume is off: start or resume it (POST /v1/sandboxes/"+t.SandboxID+"/start)",
			map[string]any{"reason": ReasonAutoResumeDisabled})
	case r.Context().Err() != nil:
		// The client went away; nobody reads an answer.
	case errors.As(err, &se):
		writeError(w, http.StatusServiceUnavailable, "sandbox_unavailable",
			fmt.Sprintf("the sandbox is %s and cannot be resumed by a request", se.State), map[string]any{"state": se.State})
	case errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusGatewayTimeout, "preview_timeout",
			fmt.Sprintf("the sandbox did not start, or its port %d did not answer, within %s", t.Port, s.cfg.ResumeTimeout), nil)
	default:
		s.log.Error("preview auto-resume", "sandbox", t.SandboxID, "err", err)
		writeError(w, http.StatusBadGateway, "bad_gateway", "the sandbox could not be resumed; retry", nil)
	}
}

func writeError(w http.ResponseWriter, status int, code, msg string, extra map[string]any) {
	body := map[string]any{"code": code, "error": msg}
	for k, v := range extra {
		body[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// begin and end count a sandbox's requests in flight; Serve's ticker marks
// those sandboxes active while any is open.
func (s *Server) begin(id string) {
	s.activeMu.Lock()
	s.active[id]++
	s.activeMu.Unlock()
	s.be.Touch(id)
}

func (s *Server) end(id string) {
	s.activeMu.Lock()
	if s.active[id]--; s.active[id] <= 0 {
		delete(s.active, id)
	}
	s.activeMu.Unlock()
	s.be.Touch(id)
}

func (s *Server) touchActive() {
	s.activeMu.Lock()
	ids := make([]string, 0, len(s.active))
	for id := range s.active {
		ids = append(ids, id)
	}
	s.activeMu.Unlock()
	for _, id := range ids {
		s.be.Touch(id)
	}
}

// bufferPool lends 256 KiB copy buffers: fewer syscalls per byte than the
// proxy's default 32 KiB on large downloads and uploads.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

func (bufferPool) Get() []byte  { return *(buffers.Get().(*[]byte)) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }

// flight coalesces concurrent auto-resumes of one sandbox into one call.
type flight struct {
	mu    sync.Mutex
	calls map[string]*call
}

type call struct {
	done chan struct{}
	sb   sandbox.Sandbox
	err  error
}

// do runs fn once for concurrent callers with the same key; each caller
// stops waiting when its ctx ends, while fn runs on.
func (f *flight) do(ctx context.Context, wg *sync.WaitGroup, key string, fn func() (sandbox.Sandbox, error)) (sandbox.Sandbox, error) {
	f.mu.Lock()
	c, ok := f.calls[key]
	if !ok {
		c = &call{done: make(chan struct{})}
		f.calls[key] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.sb, c.err = fn()
			f.mu.Lock()
			delete(f.calls, key)
			f.mu.Unlock()
			close(c.done)
		}()
	}
	f.mu.Unlock()
	select {
	case <-c.done:
		return c.sb, c.err
	case <-ctx.Done():
		return sandbox.Sandbox{}, ctx.Err()
	}
}
