// Package platinumtest runs ptd in-process for tests of code built on the
// Go SDK: the real /v1 handler over the real control plane, a temporary
// SQLite store and a test host (internal/hostapi/hosttest) whose sandboxes
// are pt-agent servers on loopback instead of containers. What a client sees
// — routes, shapes, validation messages, error codes, state changes — is
// ptd's own, so a test that passes here passes against a real ptd; only
// what a container would add (isolation, a root filesystem of its own) is
// missing: commands run on the test machine as the test's user.
package platinumtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/agent"
	"github.com/platinum-dev/platinum/internal/artifacts"
	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/events"
	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/hostapi/hosttest"
	"github.com/platinum-dev/platinum/internal/httpapi"
	objfs "github.com/platinum-dev/platinum/internal/objstore/fs"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/sessions"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// Tokens the server accepts. AdminToken is the default org's admin token
// (what `ptd serve` bootstraps); Token is an ordinary member token of the
// same org.
const (
	Token      = "pt_test_token"
	AdminToken = "pt_test_admin"
)

// Server is ptd serving /v1 on an httptest.Server. Its Close (also run at
// the test's cleanup) stops the API, the control plane and every sandbox.
type Server struct {
	*httptest.Server

	// Host is the test host under the control plane. Its Func fields
	// change what starts, builds, destroys and metrics do (set them before
	// the requests they should affect); by default every start succeeds.
	Host *hosttest.Host

	store store.Store
	host  *agentHost
	once  sync.Once
	close func()

	mu       sync.Mutex
	requests []string
}

// Option changes the server NewServer builds.
type Option func(*controlplane.Config)

// WithConfig lets a test change the control plane's configuration (retention
// units, waits, limits) before the server starts.
func WithConfig(tune func(*controlplane.Config)) Option { return Option(tune) }

// NewServer starts a server for t. Its store, disks and archives live in
// t.TempDir(); everything is torn down at t's cleanup.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	st, err := sqlite.Open(ctx, filepath.Join(dir, "ptd.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := objfs.Open(filepath.Join(dir, "objects"))
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	// Every sandbox's disk is this one image: archives have bytes to move.
	img := filepath.Join(dir, "disk.img")
	if err := os.Mkdir(filepath.Join(dir, "disks"), 0o700); err != nil {
		st.Close()
		t.Fatal(err)
	}
	if err := os.WriteFile(img, bytes.Repeat([]byte("platinum"), 4096), 0o600); err != nil {
		st.Close()
		t.Fatal(err)
	}
	h := &agentHost{Host: &hosttest.Host{DiskImageFile: img}, t: t, dir: dir, agents: map[string]*sandboxAgent{}}

	cfg := controlplane.DefaultConfig()
	cfg.Objects = objs
	cfg.TimerInterval = 50 * time.Millisecond
	cfg.PollInterval = 50 * time.Millisecond
	for _, o := range opts {
		o(&cfg)
	}
	feed := &events.Feed{}
	fst := feed.Wrap(st)
	tn := tenancy.New(tenancy.DefaultConfig(), fst, log)
	cp := controlplane.New(cfg, fst, h, tn, log)
	ev := events.New(events.DefaultConfig(), fst, feed, log)
	artCfg := artifacts.DefaultConfig()
	artCfg.Objects = objs
	art := artifacts.New(artCfg, fst, cp, log)
	sesCfg := sessions.DefaultConfig()
	sesCfg.Objects, sesCfg.PollInterval = objs, cfg.PollInterval
	sesCfg.DefaultWait, sesCfg.MaxWait = cfg.DefaultWait, cfg.MaxWait
	sesCfg.ProvisionTimeout, sesCfg.ReadyTimeout = cfg.ProvisionTimeout, cfg.ProvisionTimeout+cfg.TemplateBuildTimeout
	ses := sessions.New(sesCfg, fst, cp, tn, log)
	stop := func() {
		ses.Close()
		cp.Close()
		ev.Close()
		art.Close()
		h.closeAll()
		st.Close()
	}
	if _, err := tn.Bootstrap(ctx, AdminToken); err != nil {
		stop()
		t.Fatal(err)
	}
	if err := st.CreateToken(ctx, store.Token{
		ID: sandbox.NewID(sandbox.PrefixToken), OrgID: tenancy.DefaultOrgID, Role: store.RoleMember,
		Hash: tenancy.HashToken(Token), CreatedAt: time.Now().UTC(),
	}); err != nil {
		stop()
		t.Fatal(err)
	}
	srv := &Server{Host: h.Host, store: st, host: h}
	api := httpapi.New(httpapi.Deps{Sandboxes: cp, Tenancy: tn, Events: ev, Artifacts: art, Sessions: ses}, log)
	srv.Server = httptest.NewServer(srv.record(api))
	srv.close = func() {
		srv.Server.CloseClientConnections()
		srv.Server.Close()
		stop()
	}
	t.Cleanup(srv.Close)
	return srv
}

// Close stops the server and everything under it. It is safe to call more
// than once.
func (s *Server) Close() { s.once.Do(s.close) }

// record logs each request's method, path and query (Requests) before
// the API serves it.
func (s *Server) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := r.Method + " " + r.URL.Path
		if r.URL.RawQuery != "" {
			line += "?" + r.URL.RawQuery
		}
		s.mu.Lock()
		s.requests = append(s.requests, line)
		s.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// Requests lists the requests the server received, oldest first, as
// "METHOD /path?query": what a test of a client checks it sent.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Sandbox reads a sandbox's record from ptd's store, deleted ones
// included: what a test checks ptd keeps (its environment's values, which
// the API never shows) rather than what it answers.
func (s *Server) Sandbox(id string) (sandbox.Sandbox, bool) {
	sb, err := s.store.GetSandbox(context.Background(), tenancy.DefaultOrgID, id)
	return sb, err == nil
}

// Creates counts the sandboxes the store holds, deleted ones included.
func (s *Server) Creates() int {
	_, n, err := s.store.ListSandboxes(context.Background(), store.ListOptions{IncludeDeleted: true})
	if err != nil {
		panic("platinumtest: " + err.Error())
	}
	return n
}

// agentHost is the test host with a pt-agent per running sandbox, each on
// its own loopback address at hostapi.AgentPort, the way the control plane
// reaches a sandbox's agent in production.
type agentHost struct {
	*hosttest.Host
	t   testing.TB
	dir string

	mu     sync.Mutex
	agents map[string]*sandboxAgent
}

// sandboxAgent is one sandbox's agent and the listener it serves on.
type sandboxAgent struct {
	srv  *agent.Server
	http *http.Server
	addr string
	// cpu, ramMB and diskGB are the sandbox's size as the host last set
	// it (Metrics reports them, and so does the agent's GET /size).
	cpu           float64
	ramMB, diskGB int
}

// Start starts the sandbox through the test host, then its agent.
func (h *agentHost) Start(ctx context.Context, spec hostapi.StartSpec) (hostapi.Instance, error) {
	inst, err := h.Host.Start(ctx, spec)
	if err != nil {
		return inst, err
	}
	a, err := h.startAgent(spec.ID, spec.AgentToken)
	if err != nil {
		return hostapi.Instance{}, err
	}
	h.mu.Lock()
	a.cpu, a.ramMB, a.diskGB = spec.CPU, spec.RAMMB, spec.DiskGB
	h.mu.Unlock()
	inst.Address = a.addr
	return inst, nil
}

// Resize records the new size, for Metrics and the guest's view.
func (h *agentHost) Resize(ctx context.Context, id string, cpu float64, ramMB int) error {
	if err := h.Host.Resize(ctx, id, cpu, ramMB); err != nil {
		return err
	}
	h.mu.Lock()
	if a := h.agents[id]; a != nil && ramMB > 0 {
		a.cpu, a.ramMB = cpu, ramMB
	}
	h.mu.Unlock()
	return nil
}

// GrowDisk records the new disk size, for Metrics.
func (h *agentHost) GrowDisk(ctx context.Context, id string, newGB int) error {
	if err := h.Host.GrowDisk(ctx, id, newGB); err != nil {
		return err
	}
	h.mu.Lock()
	if a := h.agents[id]; a != nil {
		a.diskGB = newGB
	}
	h.mu.Unlock()
	return nil
}

// Metrics reports the sandbox's memory and disk limits (nothing is used:
// there is no container to measure), unless the test host's MetricsFunc
// answers.
func (h *agentHost) Metrics(ctx context.Context, id string) (hostapi.Metrics, error) {
	if h.MetricsFunc != nil {
		return h.Host.Metrics(ctx, id)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.agents[id]
	if a == nil {
		return hostapi.Metrics{}, fmt.Errorf("sandbox %s is not running", id)
	}
	return hostapi.Metrics{MemoryLimitBytes: uint64(a.ramMB) << 20, DiskSizeBytes: uint64(a.diskGB) << 30, At: time.Now()}, nil
}

// Running reports whether the sandbox's agent runs.
func (h *agentHost) Running(ctx context.Context, id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.agents[id] != nil
}

// Stop stops the sandbox's agent (its processes end) and the test host's
// record of it.
func (h *agentHost) Stop(ctx context.Context, id string, keepMemory bool) (bool, error) {
	kept, err := h.Host.Stop(ctx, id, keepMemory)
	if err == nil {
		h.stopAgent(id)
	}
	return kept, err
}

// Destroy stops the sandbox's agent and records the destroy.
func (h *agentHost) Destroy(ctx context.Context, id string) error {
	h.stopAgent(id)
	return h.Host.Destroy(ctx, id)
}

// DiskImagePath is where a restore writes the sandbox's own disk image.
func (h *agentHost) DiskImagePath(id string) string {
	return filepath.Join(h.dir, "disks", id+".img")
}

// DiskImage is the sandbox's own disk image once a restore wrote one,
// else the image every sandbox starts with (Host.DiskImageFile).
func (h *agentHost) DiskImage(ctx context.Context, id string) (string, error) {
	if p := h.DiskImagePath(id); fileExists(p) {
		return p, nil
	}
	return h.Host.DiskImage(ctx, id)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func (h *agentHost) startAgent(id, token string) (*sandboxAgent, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a := h.agents[id]; a != nil {
		return a, nil
	}
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	cfg := agent.DefaultConfig()
	cfg.Token = token
	cfg.DefaultUser = u.Username
	srv, err := agent.New(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := listenLoopback()
	if err != nil {
		srv.Close()
		return nil, err
	}
	hs := &http.Server{Handler: h.guestSize(id, envFileInDir(srv, filepath.Join(h.dir, id+".pt-env"))), ReadHeaderTimeout: 10 * time.Second}
	hs.Protocols = new(http.Protocols)
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
	go hs.Serve(ln)
	a := &sandboxAgent{srv: srv, http: hs, addr: ln.Addr().(*net.TCPAddr).IP.String()}
	h.agents[id] = a
	return a, nil
}

func (h *agentHost) stopAgent(id string) {
	h.mu.Lock()
	a := h.agents[id]
	delete(h.agents, id)
	h.mu.Unlock()
	if a != nil {
		a.close()
	}
}

func (h *agentHost) closeAll() {
	h.mu.Lock()
	all := h.agents
	h.agents = map[string]*sandboxAgent{}
	h.mu.Unlock()
	for _, a := range all {
		a.close()
	}
}

func (a *sandboxAgent) close() {
	a.srv.Close() // kills its processes, so open streams end
	a.http.Close()
}

// listenLoopback listens at hostapi.AgentPort on a random address of
// 127.0.0.0/8 (every one of them is this machine's), retrying the rare
// address another test already holds.
func listenLoopback() (net.Listener, error) {
	var last error
	for range 50 {
		var b [4]byte
		rand.Read(b[:])
		n := binary.BigEndian.Uint32(b[:])
		ip := net.IPv4(127, byte(n>>16)|1, byte(n>>8), byte(n)|1) // never 127.0.0.x
		ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(hostapi.AgentPort)))
		if err == nil {
			return ln, nil
		}
		last = err
	}
	return nil, fmt.Errorf("no free loopback address for an agent: %w", last)
}

// guestSize serves the agent, except that its GET /size (the guest's own
// view of its size, which ptd reports after a live resize, docs/resize.md)
// answers what the host granted the sandbox: whole CPUs of its quota and
// its memory limit, as a container with LXCFS shows them. The agent
// itself would read the test machine's CPUs and memory.
func (h *agentHost) guestSize(id string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/size" {
			next.ServeHTTP(w, r)
			return
		}
		h.mu.Lock()
		var cpus, memMB int
		if a := h.agents[id]; a != nil {
			cpus, memMB = int(math.Ceil(a.cpu)), a.ramMB
		}
		h.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"cpus_online":%d,"mem_total_mb":%d}`, cpus, memMB)
	})
}

// envFileInDir serves the agent, except that the environment file ptd
// writes into every sandbox at boot (/etc/pt-env) goes to file: these
// agents share the test machine's /etc.
func envFileInDir(next http.Handler, file string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query(); q.Get("path") == "/etc/pt-env" {
			q.Set("path", file)
			r.URL.RawQuery = q.Encode()
		}
		next.ServeHTTP(w, r)
	})
}
