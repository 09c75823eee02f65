package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/artifacts"
	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/events"
	"github.com/platinum-dev/platinum/internal/sessions"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// slowHost is a controlplane.Host whose starts and stops block until
// released, so waits run out.
type slowHost struct{ release chan struct{} }

func (h *slowHost) ID() string          { return "host_test" }
func (h *slowHost) Templates() []string { return []string{"busybox"} }
func (h *slowHost) BuildTemplate(ctx context.Context, slug, v string, _ func(string)) (string, int64, error) {
	return "/t/" + v, 1, nil
}
func (h *slowHost) Start(ctx context.Context, spec controlplane.StartSpec) (controlplane.Instance, error) {
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return controlplane.Instance{Address: "127.0.0.1"}, nil
}
func (h *slowHost) Running(ctx context.Context, id string) bool { return true }
func (h *slowHost) Stop(ctx context.Context, id string, keep bool) (bool, error) {
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return keep, nil
}
func (h *slowHost) Frozen(ctx context.Context, id string) bool { return false }
func (h *slowHost) DiskImage(ctx context.Context, id string) (string, error) {
	return "", context.Canceled
}
func (h *slowHost) DiskImagePath(id string) string                  { return "" }
func (h *slowHost) RemoveDisk(ctx context.Context, id string) error { return nil }
func (h *slowHost) Destroy(ctx context.Context, id string) error    { return nil }

func newServer(t *testing.T) (*httptest.Server, *slowHost, string) {
	t.Helper()
	return newServerWith(t, nil)
}

// newServerWith is newServer with the control plane's defaults changed by
// tune (when not nil) before it starts.
func newServerWith(t *testing.T, tune func(*controlplane.Config)) (*httptest.Server, *slowHost, string) {
	t.Helper()
	h := &slowHost{release: make(chan struct{})}
	srv := serveHost(t, h, tune)
	t.Cleanup(func() {
		select {
		case <-h.release:
		default:
			close(h.release)
		}
	})
	return srv, h, "tok"
}

// serveHost serves the API of a control plane over SQLite and host h, with
// admin token "tok". Its cleanup closes them; a caller whose host can block
// registers the host's release after calling it, so that runs first.
func serveHost(t *testing.T, h controlplane.Host, tune func(*controlplane.Config)) *httptest.Server {
	t.Helper()
	return serveStore(t, h, tune, nil)
}

// serveStore is serveHost over the SQLite store as wrap (when not nil)
// changes it.
func serveStore(t *testing.T, h controlplane.Host, tune func(*controlplane.Config), wrap func(store.Store) store.Store) *httptest.Server {
	t.Helper()
	return serveLogged(t, h, tune, wrap, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// serveLogged is serveStore with the control plane and the API logging to
// log.
func serveLogged(t *testing.T, h controlplane.Host, tune func(*controlplane.Config), wrap func(store.Store) store.Store, log *slog.Logger) *httptest.Server {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := controlplane.DefaultConfig()
	if tune != nil {
		tune(&cfg)
	}
	var cst store.Store = st
	if wrap != nil {
		cst = wrap(st)
	}
	feed := &events.Feed{}
	fst := feed.Wrap(cst) // every part's commits wake event readers
	tn := tenancy.New(tenancy.DefaultConfig(), fst, log)
	cp := controlplane.New(cfg, fst, h, tn, log)
	ev := events.New(events.DefaultConfig(), fst, feed, log)
	artCfg := artifacts.DefaultConfig()
	artCfg.Objects = cfg.Objects
	art := artifacts.New(artCfg, fst, cp, log)
	sesCfg := sessions.DefaultConfig()
	sesCfg.Objects, sesCfg.PollInterval = cfg.Objects, cfg.PollInterval
	sesCfg.DefaultWait, sesCfg.MaxWait = cfg.DefaultWait, cfg.MaxWait
	sesCfg.ProvisionTimeout, sesCfg.ReadyTimeout = cfg.ProvisionTimeout, cfg.ProvisionTimeout+cfg.TemplateBuildTimeout
	ses := sessions.New(sesCfg, fst, cp, tn, log)
	cp.SkipAgentInit()
	if _, err := tn.Bootstrap(context.Background(), "tok"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ses.Close()
		cp.Close()
		ev.Close()
		st.Close()
	})
	srv := serveAPI(t, New(Deps{Sandboxes: cp, Tenancy: tn, Events: ev, Artifacts: art, Sessions: ses}, log)) // closed before the control plane
	return srv
}

// send makes one request as tok's caller and returns the answer unread
// (the caller closes its body): call reads it as one JSON document,
// streaming tests read it as it comes.
func send(t *testing.T, srv *httptest.Server, tok, method, path, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func call(t *testing.T, srv *httptest.Server, tok, method, path, body string) (*http.Response, map[string]any) {
	t.Helper()
	resp := send(t, srv, tok, method, path, body)
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp, m
}

// TestWaitRunsOutIs202: a wait that runs out is never a 200; it is a 202
// naming the sandbox, with Retry-After, and the record's current state.
func TestWaitRunsOutIs202(t *testing.T) {
	srv, h, tok := newServer(t)
	resp, m := call(t, srv, tok, "POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=100", `{"template":"busybox"}`)
	if resp.StatusCode != 202 || m["wait_timed_out"] != true || m["state"] != "creating" || resp.Header.Get("Retry-After") != "5" || m["id"] == nil {
		t.Fatalf("create wait: %d %v %v", resp.StatusCode, resp.Header, m)
	}
	id := m["id"].(string)
	close(h.release)
	resp, m = call(t, srv, tok, "POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running&wait_timeout_ms=5000", "")
	if resp.StatusCode != 200 || m["state"] != "running" || m["wait_timed_out"] != nil {
		t.Fatalf("start wait: %d %v", resp.StatusCode, m)
	}
	// Stops are instant now, so a stop wait reaches its state: 200.
	resp, m = call(t, srv, tok, "POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", "")
	if resp.StatusCode != 200 || m["state"] != "stopped" {
		t.Fatalf("stop wait: %d %v", resp.StatusCode, m)
	}
	// Bad wait parameters change nothing.
	resp, m = call(t, srv, tok, "POST", "/v1/sandboxes/"+id+"/start?wait_for_state=stopped", "")
	if resp.StatusCode != 400 || m["code"] != "invalid_request" {
		t.Fatalf("bad wait state: %d %v", resp.StatusCode, m)
	}
	_, m = call(t, srv, tok, "GET", "/v1/sandboxes/"+id, "")
	if m["state"] != "stopped" {
		t.Errorf("a refused start changed the sandbox: %v", m["state"])
	}
}

func (h *slowHost) Resize(ctx context.Context, id string, cpu float64, ramMB int) error { return nil }
func (h *slowHost) GrowDisk(ctx context.Context, id string, newGB int) error            { return nil }
func (h *slowHost) Metrics(ctx context.Context, id string) (controlplane.Metrics, error) {
	return controlplane.Metrics{}, nil
}
func (h *slowHost) Classes() []string           { return []string{"runc", "gvisor"} }
func (h *slowHost) Info() controlplane.HostInfo { return controlplane.HostInfo{ID: "host_test"} }
