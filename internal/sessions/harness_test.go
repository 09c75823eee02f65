package sessions

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/platinum-dev/platinum/api/gen/filesystem"
	"github.com/platinum-dev/platinum/api/gen/filesystem/filesystemconnect"
	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/hostapi/hosttest"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

type fakeHost = hosttest.Host

// The core's names the tests use.
type (
	CreateRequest = controlplane.CreateRequest
	Patch         = controlplane.Patch
	StartSpec     = controlplane.StartSpec
	Instance      = controlplane.Instance
)

var org = Principal{OrgID: "org_a", Role: store.RoleAdmin}

// newTestService is newServiceWith over a fresh store.
func newTestService(t *testing.T, h *fakeHost) (*Service, *controlplane.Service, store.Store) {
	t.Helper()
	return newServiceWith(t, h, "")
}

// newServiceWith opens a SQLite store at path (in a fresh temp dir when
// empty), a core over it and h with a 20 ms poll and no agent init, and
// the sessions service over both, as cmd/ptd wires them. All close at the
// test's cleanup, the sessions service first.
func newServiceWith(t testing.TB, h controlplane.Host, path string) (*Service, *controlplane.Service, store.Store) {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "db")
	}
	st, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := controlplane.DefaultConfig()
	cfg.PollInterval = 20 * time.Millisecond
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tn := tenancy.New(tenancy.DefaultConfig(), st, log)
	cp := controlplane.New(cfg, st, h, tn, log)
	cp.SkipAgentInit()
	scfg := DefaultConfig()
	scfg.PollInterval = cfg.PollInterval
	s := New(scfg, st, stubAgentCore{cp, stubAgent(t)}, tn, log)
	t.Cleanup(func() { s.Close(); cp.Close(); st.Close() })
	return s, cp, st
}

// stubAgentCore is the core with every sandbox's pt-agent a stub (the fake
// host runs none) that answers the calls pools and claims make: a
// directory is made, a path is there, no code interpreter to wait for.
type stubAgentCore struct {
	*controlplane.Service
	url string
}

func (c stubAgentCore) AgentFor(sandbox.Sandbox) *agentclient.Client {
	return agentclient.New(c.url, "stub", nil)
}

type stubFS struct {
	filesystemconnect.UnimplementedFilesystemHandler
}

func (stubFS) MakeDir(context.Context, *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	return connect.NewResponse(&filesystem.MakeDirResponse{}), nil
}

func (stubFS) Stat(context.Context, *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	return connect.NewResponse(&filesystem.StatResponse{Entry: &filesystem.EntryInfo{Name: "/"}}), nil
}

// stubAgent serves stubFS and returns its URL.
func stubAgent(t testing.TB) string {
	mux := http.NewServeMux()
	mux.Handle(filesystemconnect.NewFilesystemHandler(stubFS{}))
	mux.HandleFunc("GET /code/ready", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// setOrgDefaults gives s a tenancy service whose default org quotas tune
// changed (an org's overrides still win).
func setOrgDefaults(s *Service, st store.Store, tune func(*tenancy.Config)) {
	c := tenancy.DefaultConfig()
	tune(&c)
	s.tenancy = tenancy.New(c, st, s.log)
}
