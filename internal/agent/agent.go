// Package agent is pt-agent's server: the init process inside every sandbox
// that runs commands (pipes or PTY), serves files and watches directories for
// the host. It speaks E2B envd's wire protocol (Connect RPC process and
// filesystem services plus the plain /files, /health, /envs, /init and
// /metrics endpoints) so the stock e2b SDK can talk to it unmodified, and
// Daytona's toolbox routes under /toolbox/ (toolbox.go), which ptd's
// Daytona surface routes here.
package agent

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/platinum-dev/platinum/api/gen/filesystem/filesystemconnect"
	"github.com/platinum-dev/platinum/api/gen/process/processconnect"
	"golang.org/x/sys/unix"
)

// Config configures a Server. Build it with DefaultConfig so new fields get
// sane values.
type Config struct {
	// Token is the access token every request except GET /health must carry
	// in X-Access-Token. Required; POST /init may replace it later.
	Token string
	// DefaultUser runs processes and owns files when a request names no
	// user; POST /init's defaultUser replaces it.
	DefaultUser string
	// Logger receives the agent's logs; nil discards them.
	Logger *slog.Logger
	// Reaper, when set, is the PID 1 reaper that collects every child's
	// status (its Run loop must be running). When nil each started process
	// is waited for individually, which is right when the agent is not init
	// (tests, development).
	Reaper *Reaper
	// DrainWindow bounds how long output is still read after a process has
	// exited, which only matters when a background grandchild keeps its
	// stdout open; the end event follows right after.
	DrainWindow time.Duration
	// EndRetention is how long a finished process stays attachable by
	// Connect, which then replays its end event.
	EndRetention time.Duration
	// EnvFile, when set, receives the sandbox-level environment as a JSON
	// object each time /init sets it (0600, replaced atomically), for
	// services that must see env patches without a restart (the code
	// interpreter applies it before every cell).
	EnvFile string
	// EnvScript, when set, is where POST /init writes the environment as
	// shell export lines when its body asks (envscript; pt-agent:
	// /etc/pt-env).
	EnvScript string
	// CodeInterpreter, when set, is the base URL of the sandbox's
	// code-interpreter server (codeinterp, in templates that have it):
	// the toolbox's codeRun and interpreter routes run on its kernels.
	CodeInterpreter string
	// MemoryGuard, when set, is the sandbox's OOM killer (gVisor has none
	// of its own; memguard.go); GET /oom reports its kills. Its Run loop
	// is the caller's to start.
	MemoryGuard *MemoryGuard
}

// DefaultConfig returns a Config with every optional field set.
func DefaultConfig() Config {
	return Config{DefaultUser: "root", DrainWindow: 20 * time.Millisecond, EndRetention: time.Minute}
}

// ConfigError reports which Config field is invalid.
type ConfigError struct {
	Field string
	Err   error
}

func (e *ConfigError) Error() string { return "agent config " + e.Field + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// Validate reports the first invalid field as a *ConfigError.
func (c Config) Validate() error {
	switch {
	case c.Token == "":
		return &ConfigError{Field: "Token", Err: errors.New("must not be empty")}
	case c.DefaultUser == "":
		return &ConfigError{Field: "DefaultUser", Err: errors.New("must not be empty")}
	case c.DrainWindow <= 0:
		return &ConfigError{Field: "DrainWindow", Err: errors.New("must be positive")}
	case c.EndRetention < 0:
		return &ConfigError{Field: "EndRetention", Err: errors.New("must not be negative")}
	}
	return nil
}

// Server is pt-agent's http.Handler. Create it with New.
type Server struct {
	cfg    Config
	log    *slog.Logger
	spawn  spawner
	mux    *http.ServeMux
	procs  *procTable
	watch  *watcherTable
	cpu    cpuSampler
	mu     sync.RWMutex // guards the fields below
	token  string
	env    map[string]string
	user   string // default user
	workdr string // default working directory; "" means the user's home
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:   cfg,
		log:   logger,
		procs: newProcTable(),
		watch: newWatcherTable(),
		token: cfg.Token,
		env:   map[string]string{},
		user:  cfg.DefaultUser,
	}
	childSignalsDefault()
	s.spawn = directWaiter{}
	if cfg.Reaper != nil {
		s.spawn = cfg.Reaper
	}
	opts := connect.WithInterceptors(authInterceptor{s})
	mux := http.NewServeMux()
	mux.Handle(processconnect.NewProcessHandler(&processService{s}, opts))
	mux.Handle(filesystemconnect.NewFilesystemHandler(&filesystemService{s}, opts))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /files", s.handleDownload)
	mux.HandleFunc("POST /files", s.handleUpload)
	mux.HandleFunc("POST /files/tar", s.handleExtract)
	mux.HandleFunc("GET /artifact", s.handleArtifact)
	mux.HandleFunc("GET /envs", s.handleEnvs)
	mux.HandleFunc("POST /init", s.handleInit)
	mux.HandleFunc("GET /metrics", s.handleMetrics)
	mux.HandleFunc("GET /size", s.handleSize)
	mux.HandleFunc("GET /oom", s.handleOOM)
	s.toolboxRoutes(mux) // Daytona's toolbox API (toolbox.go)
	s.mux = mux
	return s, nil
}

// ServeHTTP authenticates plain HTTP requests and dispatches every request;
// RPCs are authenticated by a Connect interceptor so that their errors use
// the Connect wire format.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !isRPC(r.URL.Path) && !(r.Method == http.MethodGet && r.URL.Path == "/health") {
		if !s.authorized(r.Header.Get(headerToken)) && !s.signedFiles(r) {
			writeHTTPError(w, http.StatusUnauthorized, "invalid or missing access token", "")
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// Signal forwards sig to every running process the agent started (pt-agent
// relays SIGTERM/SIGINT to them when it is asked to stop).
func (s *Server) Signal(sig unix.Signal) {
	for _, p := range s.procs.running() {
		_ = p.signal(sig)
	}
}

// Wait blocks until no started process is running or done is closed.
func (s *Server) Wait(done <-chan struct{}) {
	for _, p := range s.procs.running() {
		select {
		case <-p.done:
		case <-done:
			return
		}
	}
}

// Close kills every running process and stops every watcher.
func (s *Server) Close() error {
	s.Signal(unix.SIGKILL)
	s.watch.closeAll()
	return nil
}

const (
	headerToken     = "X-Access-Token"
	headerKeepalive = "Keepalive-Ping-Interval"
	// HeaderExtensions: a caller that sends it with any value gets
	// Platinum's extension fields (numbered 1000 and up) in answers; envd
	// clients never send it, so their answers stay exactly envd's.
	HeaderExtensions = "Pt-Extensions"
)

// wantsExtensions reports whether the caller asked for extension fields.
func wantsExtensions(h http.Header) bool { return h.Get(HeaderExtensions) != "" }

func isRPC(path string) bool {
	return strings.HasPrefix(path, "/"+processconnect.ProcessName+"/") ||
		strings.HasPrefix(path, "/"+filesystemconnect.FilesystemName+"/")
}

func (s *Server) authorized(got string) bool {
	s.mu.RLock()
	want := s.token
	s.mu.RUnlock()
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// sandboxEnv returns a copy of the sandbox-level environment.
func (s *Server) sandboxEnv() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.env)
}

func (s *Server) defaults() (user, workdir string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.user, s.workdr
}

// authInterceptor checks X-Access-Token on every RPC.
type authInterceptor struct{ s *Server }

var errBadToken = errors.New("invalid or missing access token")

func (a authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !a.s.authorized(req.Header().Get(headerToken)) {
			return nil, connect.NewError(connect.CodeUnauthenticated, errBadToken)
		}
		return next(ctx, req)
	}
}

func (a authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if !a.s.authorized(conn.RequestHeader().Get(headerToken)) {
			return connect.NewError(connect.CodeUnauthenticated, errBadToken)
		}
		return next(ctx, conn)
	}
}
