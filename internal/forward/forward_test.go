package forward_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/forward"
	"github.com/platinum-dev/platinum/internal/hostreg"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
	"github.com/platinum-dev/platinum/internal/upstream"
)

// peer is another host's ptd: it records what reaches it.
type peer struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []*http.Request
}

func newPeer(t *testing.T) *peer {
	p := &peer{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		p.mu.Lock()
		p.got = append(p.got, r)
		p.mu.Unlock()
		w.Header().Set("X-Peer", p.srv.URL)
		w.Write(body)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *peer) requests() []*http.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*http.Request(nil), p.got...)
}

type fixture struct {
	st    *sqlite.Store
	local http.Handler
	hits  *int
}

func newFixture(t *testing.T) fixture {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "pt.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	hits := new(int)
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*hits++
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Peer", "local")
		w.Write(body)
	})
	return fixture{st: st, local: local, hits: hits}
}

// register adds a host with ramMB of memory and the given classes.
func (f fixture) register(t *testing.T, id, url string, ramMB int, classes ...string) {
	c := hostreg.Capacity{CPU: 2, RAMMB: ramMB}
	for _, cl := range classes {
		c.Classes = append(c.Classes, hostreg.ClassCap{Name: cl})
	}
	b, _ := json.Marshal(c)
	if _, err := f.st.RegisterHost(context.Background(), store.HostRecord{ID: id, URL: url, Capacity: b}); err != nil {
		t.Fatal(err)
	}
}

// sandboxOn records a running sandbox of ramMB placed on host.
func (f fixture) sandboxOn(t *testing.T, host string, ramMB int) string {
	id := sandbox.NewID(sandbox.PrefixSandbox)
	now := time.Now().UTC()
	sb := sandbox.Sandbox{ID: id, OrgID: "org_a", Name: strings.ToLower(id), State: sandbox.StateRunning,
		Template: "busybox", CPU: 1, RAMMB: ramMB, DiskGB: 1, HostID: host, CreatedAt: now, UpdatedAt: now, Version: 1}
	if err := f.st.CreateSandbox(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	return id
}

func send(h http.Handler, method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestRequestsGoToTheSandboxesHost(t *testing.T) {
	f := newFixture(t)
	b := newPeer(t)
	f.register(t, "host_a", "http://a.invalid", 8192, "runc")
	f.register(t, "host_b", b.srv.URL, 8192, "runc")
	onA, onB := f.sandboxOn(t, "host_a", 512), f.sandboxOn(t, "host_b", 512)
	h := forward.New(f.st, "host_a", true, slog.New(slog.DiscardHandler)).Wrap(f.local)

	for _, tc := range []struct {
		name, method, path string
		hdr                []string
		want               string // "local" or "b"
	}{
		{"own sandbox", "POST", "/v1/sandboxes/" + onA + "/exec", nil, "local"},
		{"peer's sandbox", "POST", "/v1/sandboxes/" + onB + "/exec", nil, "b"},
		{"peer's record", "GET", "/v1/sandboxes/" + onB, nil, "b"},
		{"E2B path", "POST", "/sandboxes/" + onB + "/timeout", nil, "b"},
		{"envd traffic", "POST", "/process.Process/Start", []string{"E2b-Sandbox-Id", onB + "-host_b"}, "b"},
		{"Daytona toolbox", "GET", "/daytona/toolbox/" + onB + "/files", nil, "b"},
		{"unknown sandbox", "GET", "/v1/sandboxes/sbx_01JNDX3V6Z9Q6N1S9Y8K7C2F3A", nil, "local"},
		{"no sandbox", "GET", "/v1/sandboxes", nil, "local"},
		{"health", "GET", "/healthz", nil, "local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(b.requests())
			w := send(h, tc.method, tc.path, "payload", tc.hdr...)
			got := "local"
			if w.Header().Get("X-Peer") == b.srv.URL {
				got = "b"
			}
			if got != tc.want || w.Body.String() != "payload" {
				t.Fatalf("%s %s served by %s (%d %q), want %s", tc.method, tc.path, got, w.Code, w.Body, tc.want)
			}
			if tc.want == "b" {
				r := b.requests()[before]
				if r.Header.Get(forward.Header) != "host_a" || r.Header.Get("Authorization") != "Bearer tok" || r.URL.Path != tc.path {
					t.Fatalf("forwarded request = %s %v, want the path, the caller's token and %s", r.URL.Path, r.Header, forward.Header)
				}
			}
		})
	}

	// A request a peer sent is served here, never sent on; but a sandbox
	// a live host runs is never driven from here, whoever asks.
	if w := send(h, "GET", "/v1/sandboxes/"+onA, "", forward.Header, "host_b"); w.Header().Get("X-Peer") != "local" {
		t.Fatalf("forwarded request for an own sandbox: %d %v", w.Code, w.Header())
	}
	n := len(b.requests())
	if w := send(h, "POST", "/v1/sandboxes/"+onB+"/stop", "", forward.Header, "host_x"); w.Code != 503 || !strings.Contains(w.Body.String(), `"error":`) || !strings.Contains(w.Body.String(), `"unavailable"`) {
		t.Fatalf("a peer's sandbox asked with the header: %d %s, want 503 unavailable", w.Code, w.Body)
	}
	if len(b.requests()) != n {
		t.Fatal("a request that carried the header was sent on")
	}

	// A lost host's sandboxes are answered here (their records say so),
	// while requests for a live peer's still go there.
	c := newPeer(t)
	f.register(t, "host_c", c.srv.URL, 8192, "runc")
	onC := f.sandboxOn(t, "host_c", 512)
	if _, err := f.st.SetHostState(context.Background(), "host_b", 0, store.HostLost, "test"); err != nil {
		t.Fatal(err)
	}
	h = forward.New(f.st, "host_a", true, slog.New(slog.DiscardHandler)).Wrap(f.local)
	if w := send(h, "GET", "/v1/sandboxes/"+onB, ""); w.Header().Get("X-Peer") != "local" {
		t.Fatalf("a lost host's sandbox went to %q", w.Header().Get("X-Peer"))
	}
	if w := send(h, "GET", "/v1/sandboxes/"+onC, ""); w.Header().Get("X-Peer") != c.srv.URL {
		t.Fatalf("a live peer's sandbox went to %q", w.Header().Get("X-Peer"))
	}
	// Back (registered again), it gets its sandboxes' requests at once,
	// though the router read it lost a moment ago.
	f.register(t, "host_b", b.srv.URL, 8192, "runc")
	if w := send(h, "GET", "/v1/sandboxes/"+onB, ""); w.Header().Get("X-Peer") != b.srv.URL {
		t.Fatalf("a host back from lost: its sandbox went to %q", w.Header().Get("X-Peer"))
	}
}

func TestAHostAloneServesEverything(t *testing.T) {
	f := newFixture(t)
	f.register(t, "host_a", "http://a.invalid", 8192, "runc")
	id := f.sandboxOn(t, "host_a", 512)
	h := forward.New(f.st, "host_a", true, slog.New(slog.DiscardHandler)).Wrap(f.local)
	for _, p := range []string{"/v1/sandboxes", "/v1/sandboxes/" + id + "/exec"} {
		if w := send(h, "POST", p, `{"template":"busybox"}`); w.Header().Get("X-Peer") != "local" || w.Body.String() != `{"template":"busybox"}` {
			t.Fatalf("POST %s: %d %v %q", p, w.Code, w.Header(), w.Body)
		}
	}
}

func TestCreatesArePlaced(t *testing.T) {
	f := newFixture(t)
	b, c := newPeer(t), newPeer(t)
	f.register(t, "host_a", "http://a.invalid", 8192, "runc", "gvisor")
	f.register(t, "host_b", b.srv.URL, 8192, "runc", "gvisor")
	f.register(t, "host_c", c.srv.URL, 8192, "runc")
	r := forward.New(f.st, "host_a", true, slog.New(slog.DiscardHandler))
	h := r.Wrap(f.local)
	ids := func(hs []store.HostRecord) string {
		var s []string
		for _, x := range hs {
			s = append(s, x.ID)
		}
		return strings.Join(s, ",")
	}
	ctx := context.Background()
	// Equal: this host first (no hop), then by ID.
	if got := ids(r.Candidates(ctx, "")); got != "host_a,host_b,host_c" {
		t.Fatalf("candidates of an empty platform = %s", got)
	}
	f.sandboxOn(t, "host_a", 1024)
	f.sandboxOn(t, "host_b", 512)
	if got := ids(r.Candidates(ctx, "")); got != "host_c,host_b,host_a" {
		t.Fatalf("candidates by free memory = %s", got)
	}
	if got := ids(r.Candidates(ctx, "gvisor")); got != "host_b,host_a" {
		t.Fatalf("gvisor candidates = %s, want only the hosts that run it", got)
	}
	body := `{"template":"busybox","runtime":"gvisor"}`
	if w := send(h, "POST", "/v1/sandboxes", body, "Idempotency-Key", "k1"); w.Header().Get("X-Peer") != b.srv.URL || w.Body.String() != body {
		t.Fatalf("gvisor create served by %q: %d %q", w.Header().Get("X-Peer"), w.Code, w.Body)
	}
	if got := b.requests()[0]; got.Header.Get("Idempotency-Key") != "k1" {
		t.Fatalf("the create reached b without its idempotency key: %v", got.Header)
	}
	for _, p := range []string{"/sandboxes", "/daytona/api/sandbox"} {
		if w := send(h, "POST", p, `{}`); w.Header().Get("X-Peer") != c.srv.URL {
			t.Fatalf("POST %s served by %q, want host c (most free)", p, w.Header().Get("X-Peer"))
		}
	}

	// Draining hosts take nothing; an unreachable one is passed over
	// (nothing reached it); with no host left, this ptd answers.
	if _, err := f.st.SetHostState(ctx, "host_b", 0, store.HostDraining, "test"); err != nil {
		t.Fatal(err)
	}
	c.srv.Close()
	r = forward.New(f.st, "host_a", true, slog.New(slog.DiscardHandler))
	if w := send(r.Wrap(f.local), "POST", "/v1/sandboxes", `{}`); w.Header().Get("X-Peer") != "local" {
		t.Fatalf("create with c unreachable and b draining served by %q: %d %s", w.Header().Get("X-Peer"), w.Code, w.Body)
	}
	if _, err := f.st.SetHostState(ctx, "host_a", 0, store.HostDraining, "test"); err != nil {
		t.Fatal(err)
	}
	r = forward.New(f.st, "host_a", true, slog.New(slog.DiscardHandler))
	before := *f.hits
	if w := send(r.Wrap(f.local), "POST", "/v1/sandboxes", `{"template":"x"}`); w.Header().Get("X-Peer") != "local" || *f.hits != before+1 {
		t.Fatalf("create with every host draining: %d %v", w.Code, w.Header())
	}
}

// TestADrainedHostSeesAHostJoin: a ptd that last read itself alone on its
// store and is then drained places a create on a host that joined since,
// at once: the create reads the host list again rather than refusing as if
// no host took sandboxes.
func TestADrainedHostSeesAHostJoin(t *testing.T) {
	f := newFixture(t)
	f.register(t, "host_a", "http://a.invalid", 8192, "runc")
	h := forward.New(f.st, "host_a", true, slog.New(slog.DiscardHandler)).Wrap(f.local)
	if w := send(h, "GET", "/v1/sandboxes", ""); w.Header().Get("X-Peer") != "local" {
		t.Fatalf("list on a host alone served by %q", w.Header().Get("X-Peer"))
	}
	b := newPeer(t)
	f.register(t, "host_b", b.srv.URL, 8192, "runc")
	if _, err := f.st.SetHostState(context.Background(), "host_a", 0, store.HostDraining, "test"); err != nil {
		t.Fatal(err)
	}
	if w := send(h, "POST", "/v1/sandboxes", `{"template":"busybox"}`); w.Header().Get("X-Peer") != b.srv.URL {
		t.Fatalf("create on a drained host after b joined served by %q: %d %s", w.Header().Get("X-Peer"), w.Code, w.Body)
	}
}

// TestAnAPIOnlyPtdServesNoCreate: a ptd that runs no sandboxes (its
// own host never registered) sends every create to a host, and answers
// 503 capacity itself when none takes it, never its own control plane.
func TestAnAPIOnlyPtdServesNoCreate(t *testing.T) {
	f := newFixture(t)
	b := newPeer(t)
	f.register(t, "host_b", b.srv.URL, 8192, "runc")
	h := forward.New(f.st, "api_1", false, slog.New(slog.DiscardHandler)).Wrap(f.local)
	if w := send(h, "POST", "/v1/sandboxes", `{}`); w.Header().Get("X-Peer") != b.srv.URL {
		t.Fatalf("create through the api went to %q", w.Header().Get("X-Peer"))
	}
	if _, err := f.st.SetHostState(context.Background(), "host_b", 0, store.HostDraining, "test"); err != nil {
		t.Fatal(err)
	}
	w := send(h, "POST", "/v1/sandboxes", `{}`)
	if w.Code != 503 || !strings.Contains(w.Body.String(), `"capacity"`) || !strings.Contains(w.Body.String(), `"no_host"`) || *f.hits != 0 {
		t.Fatalf("create with no host taking any: %d %s (local hits %d), want 503 capacity no_host", w.Code, w.Body, *f.hits)
	}
}

// A lost host's sandbox is answered where a start can take it over from
// its stop snapshot: by a host's ptd itself, and by an api-only ptd on the
// host a create would go to.
func TestALostHostsSandbox(t *testing.T) {
	f := newFixture(t)
	b := newPeer(t)
	f.register(t, "host_a", "http://a.invalid", 8192, "runc")
	f.register(t, "host_b", b.srv.URL, 8192, "runc")
	onA := f.sandboxOn(t, "host_a", 512)
	if _, err := f.st.SetHostState(context.Background(), "host_a", 0, store.HostLost, "test"); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	if w := send(forward.New(f.st, "api_1", false, log).Wrap(f.local), "POST", "/v1/sandboxes/"+onA+"/start", ""); w.Header().Get("X-Peer") != b.srv.URL {
		t.Fatalf("start through an api-only ptd served by %q, want host b", w.Header().Get("X-Peer"))
	}
	if w := send(forward.New(f.st, "host_c", true, log).Wrap(f.local), "POST", "/v1/sandboxes/"+onA+"/start", ""); w.Header().Get("X-Peer") != "local" {
		t.Fatalf("start through a host's ptd served by %q, want that ptd", w.Header().Get("X-Peer"))
	}
	// With no host taking sandboxes, the api-only ptd answers itself.
	if _, err := f.st.SetHostState(context.Background(), "host_b", 0, store.HostDraining, "test"); err != nil {
		t.Fatal(err)
	}
	if w := send(forward.New(f.st, "api_1", false, log).Wrap(f.local), "GET", "/v1/sandboxes/"+onA, ""); w.Header().Get("X-Peer") != "local" {
		t.Fatalf("with every host draining, served by %q, want the api-only ptd", w.Header().Get("X-Peer"))
	}
}

// sessionOn records a ready session holding sandbox sbx ("" for a cold
// session whose sandbox is not made yet).
func (f fixture) sessionOn(t *testing.T, sbx string) string {
	now := time.Now().UTC().Truncate(time.Microsecond)
	ses := store.Session{ID: sandbox.NewID(sandbox.PrefixSession), OrgID: "org_a", VaultID: "v_" + sbx, WorkflowID: "wf",
		Template: "busybox", SandboxID: sbx, Status: store.SessionReady, CreatedAt: now, UpdatedAt: now}
	if err := f.st.CreateSession(context.Background(), ses); err != nil {
		t.Fatal(err)
	}
	return ses.ID
}

// TestSessionsAndBuildsGoToHosts: a request naming a session goes to
// the host of the sandbox it holds (served here while it holds none, or
// one of this host's); session creates and template builds are placed
// as sandbox creates are, by the runtime class their body asks for, and
// a ptd that runs no sandboxes answers 503 capacity when no host takes
// them. The one-hop rule holds for sessions too.
func TestSessionsAndBuildsGoToHosts(t *testing.T) {
	f := newFixture(t)
	b, c := newPeer(t), newPeer(t)
	f.register(t, "host_b", b.srv.URL, 8192, "runc", "gvisor")
	f.register(t, "host_c", c.srv.URL, 8192, "runc")
	f.sandboxOn(t, "host_b", 1024) // c has the most free memory
	onB, onC := f.sandboxOn(t, "host_b", 512), f.sandboxOn(t, "host_c", 512)
	sesB, sesC, sesCold := f.sessionOn(t, onB), f.sessionOn(t, onC), f.sessionOn(t, "")
	h := forward.New(f.st, "api_1", false, slog.New(slog.DiscardHandler)).Wrap(f.local)
	peerOf := func(w *httptest.ResponseRecorder) string {
		switch w.Header().Get("X-Peer") {
		case b.srv.URL:
			return "b"
		case c.srv.URL:
			return "c"
		}
		return w.Header().Get("X-Peer")
	}
	for _, tc := range []struct {
		name, method, path, body string
		want                     string
	}{
		{"session exec", "POST", "/v1/sessions/" + sesB + "/exec", "", "b"},
		{"session files", "PUT", "/v1/sessions/" + sesC + "/files?path=/x", "", "c"},
		{"session read", "GET", "/v1/sessions/" + sesB + "?wait_timeout_ms=10", "", "b"},
		{"session stop", "DELETE", "/v1/sessions/" + sesC, "", "c"},
		{"cold session, no sandbox yet", "GET", "/v1/sessions/" + sesCold, "", "local"},
		{"unknown session", "GET", "/v1/sessions/ses_01JNDX3V6Z9Q6N1S9Y8K7C2F3A", "", "local"},
		{"session list", "GET", "/v1/sessions", "", "local"},
		{"session status", "GET", "/v1/sessions/status?vault_id=v", "", "local"},
		{"session create", "POST", "/v1/sessions", `{"vault_id":"v","workflow_id":"w"}`, "c"},
		{"custom template build", "POST", "/v1/templates", `{"slug":"t","from_image":"x"}`, "c"},
		{"gVisor template build", "POST", "/v1/templates", `{"slug":"t","from_image":"x","settings":{"runtime":"gvisor"}}`, "b"},
		{"platform template build", "POST", "/v1/templates/busybox/builds", "", "c"},
		{"platform template build, older route", "POST", "/v1/templates/busybox/build", "", "c"},
		{"template upload", "POST", "/v1/templates/uploads?purpose=context", "", "local"},
		{"template build read", "GET", "/v1/templates/t/builds/tbld_1/logs", "", "local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w := send(h, tc.method, tc.path, tc.body); peerOf(w) != tc.want || w.Body.String() != tc.body {
				t.Fatalf("%s %s served by %s (%d %q), want %s", tc.method, tc.path, peerOf(w), w.Code, w.Body, tc.want)
			}
		})
	}

	// Sent by a peer: a session whose sandbox another live host runs is
	// never driven from here.
	hb := forward.New(f.st, "host_b", true, slog.New(slog.DiscardHandler)).Wrap(f.local)
	n := len(c.requests())
	if w := send(hb, "POST", "/v1/sessions/"+sesC+"/exec", "", forward.Header, "api_1"); w.Code != 503 || !strings.Contains(w.Body.String(), `"unavailable"`) || len(c.requests()) != n {
		t.Fatalf("a peer's session asked with the header: %d %s, want 503 unavailable and nothing sent on", w.Code, w.Body)
	}
	if w := send(hb, "POST", "/v1/sessions/"+sesB+"/exec", "", forward.Header, "api_1"); w.Header().Get("X-Peer") != "local" {
		t.Fatalf("an own session asked with the header: %d %v", w.Code, w.Header())
	}

	for _, id := range []string{"host_b", "host_c"} {
		if _, err := f.st.SetHostState(context.Background(), id, 0, store.HostDraining, "test"); err != nil {
			t.Fatal(err)
		}
	}
	before := *f.hits
	for _, p := range []string{"/v1/sessions", "/v1/templates", "/v1/templates/busybox/builds"} {
		w := send(h, "POST", p, `{}`)
		if w.Code != 503 || !strings.Contains(w.Body.String(), `"capacity"`) || !strings.Contains(w.Body.String(), `"no_host"`) {
			t.Fatalf("POST %s with every host draining: %d %s, want 503 capacity no_host", p, w.Code, w.Body)
		}
	}
	if *f.hits != before {
		t.Fatal("a create no host takes reached the api-only ptd's own handler")
	}
}

// An api-only ptd whose last host list had no live host still places a
// create on a host that came back since (it serves none itself).
func TestAnAPIOnlyPtdSeesAHostComeBack(t *testing.T) {
	f := newFixture(t)
	b := newPeer(t)
	f.register(t, "host_b", b.srv.URL, 8192, "runc")
	ctx := context.Background()
	if _, err := f.st.SetHostState(ctx, "host_b", 0, store.HostLost, "test"); err != nil {
		t.Fatal(err)
	}
	h := forward.New(f.st, "api_1", false, slog.New(slog.DiscardHandler)).Wrap(f.local)
	send(h, "GET", "/v1/sandboxes", "") // the host list is read: no live host
	f.register(t, "host_b", b.srv.URL, 8192, "runc")
	if w := send(h, "POST", "/v1/sandboxes", `{}`); w.Header().Get("X-Peer") != b.srv.URL {
		t.Fatalf("create right after the host came back: %d %s, served by %q, want host b", w.Code, w.Body, w.Header().Get("X-Peer"))
	}
}

func TestSandboxOf(t *testing.T) {
	for _, tc := range []struct{ path, hdr, want string }{
		{"/v1/sandboxes/sbx_1/exec", "", "sbx_1"},
		{"/v1/sandboxes", "", ""},
		{"/sandboxes/sbx_2-host_x/timeout", "", "sbx_2"},
		{"/daytona/api/sandbox/sbx_3", "", "sbx_3"},
		{"/files", "sbx_4-client", "sbx_4"},
		{"/v1/snapshots/snap_1", "", ""},
		{"/v1/events", "", ""},
	} {
		req := httptest.NewRequest("GET", tc.path, nil)
		if tc.hdr != "" {
			req.Header.Set("E2b-Sandbox-Id", tc.hdr)
		}
		if got := forward.SandboxOf(req); got != tc.want {
			t.Errorf("SandboxOf(%s, %q) = %q, want %q", tc.path, tc.hdr, got, tc.want)
		}
	}
}

// TestRelayFromOtherListeners: a listener other than the API's (the
// preview proxy) sends another live host's sandbox's request to that
// host's ptd with its mark, as it came; its own sandboxes, a lost host's
// and every sandbox of a ptd alone on its store stay here; a request a
// peer sent for another live host's sandbox answers 503; a host that does
// not answer gives 503 unavailable.
func TestRelayFromOtherListeners(t *testing.T) {
	f := newFixture(t)
	f.register(t, "host_a", "http://a.invalid", 8192, "runc")
	onA := f.sandboxOn(t, "host_a", 512)
	r := forward.New(f.st, "host_a", true, slog.New(slog.DiscardHandler))
	relay := func(id string, hdr ...string) (*httptest.ResponseRecorder, bool) {
		req := httptest.NewRequest("GET", "/"+id+"/8080/hello?x=1", strings.NewReader("payload"))
		req.Host = "8080-x.preview.test"
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		return w, r.Relay(w, req, id, "Pt-Test-Mark")
	}
	if _, ok := r.Peer(context.Background(), onA); ok {
		t.Fatal("alone on its store, a ptd found a peer for its own sandbox")
	}
	if _, ok := relay(onA); ok {
		t.Fatal("alone on its store, a ptd relayed")
	}

	b := newPeer(t)
	f.register(t, "host_b", b.srv.URL, 8192, "runc")
	onB := f.sandboxOn(t, "host_b", 512)
	r = forward.New(f.st, "host_a", true, slog.New(slog.DiscardHandler))
	if _, ok := relay(onA); ok {
		t.Fatal("its own sandbox was relayed")
	}
	if h, ok := r.Peer(context.Background(), onB); !ok || h.ID != "host_b" {
		t.Fatalf("Peer(b's sandbox) = %v %v", h.ID, ok)
	}
	w, ok := relay(onB, "X-Pt-Preview-Token", "tok")
	if !ok || w.Header().Get("X-Peer") != b.srv.URL || w.Body.String() != "payload" {
		t.Fatalf("b's sandbox: relayed %v, %d %v %q", ok, w.Code, w.Header(), w.Body)
	}
	got := b.requests()[0]
	if got.Host != "8080-x.preview.test" || got.URL.RequestURI() != "/"+onB+"/8080/hello?x=1" || got.Header.Get("Pt-Test-Mark") != "1" ||
		got.Header.Get(forward.Header) != "host_a" || got.Header.Get("X-Pt-Preview-Token") != "tok" {
		t.Fatalf("relayed request: host %q %s %v, want it as it came with the mark and %s", got.Host, got.URL, got.Header, forward.Header)
	}
	if w, ok := relay(onB, forward.Header, "host_c"); !ok || w.Code != http.StatusServiceUnavailable || len(b.requests()) != 1 {
		t.Fatalf("a peer's relay for b's sandbox: %v %d, want 503 and nothing sent on", ok, w.Code)
	}

	// A host that does not answer.
	f.register(t, "host_d", "http://127.0.0.1:1", 8192, "runc")
	onD := f.sandboxOn(t, "host_d", 512)
	if w, ok := relay(onD); !ok || w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"unavailable"`) || w.Header().Get("Retry-After") == "" {
		t.Fatalf("a host that does not answer: %v %d %v %s, want 503 unavailable", ok, w.Code, w.Header(), w.Body)
	}
	// A lost host's sandbox is answered here.
	if _, err := f.st.SetHostState(context.Background(), "host_d", 0, store.HostLost, "test"); err != nil {
		t.Fatal(err)
	}
	r = forward.New(f.st, "host_a", true, slog.New(slog.DiscardHandler))
	if _, ok := relay(onD); ok {
		t.Fatal("a lost host's sandbox was relayed")
	}
}

// buildOn records a custom template build in status whose request names
// host as its building host, as controlplane writes it.
func (f fixture) buildOn(t *testing.T, host string, status store.BuildStatus) string {
	req, _ := json.Marshal(map[string]any{"kind": "image", "from_image": "x", "host": host})
	now := time.Now().UTC().Truncate(time.Microsecond)
	b := store.TemplateBuild{ID: sandbox.NewID(sandbox.PrefixTemplateBuild), OrgID: "org_a", Slug: "app", Status: status,
		Request: string(req), VersionID: sandbox.NewID(sandbox.PrefixTemplateVersion), CreatedAt: now, UpdatedAt: now}
	if err := f.st.CreateTemplateBuild(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return b.ID
}

// TestBuildLogsGoToTheBuildingHost: a running build's log is asked of the
// host building it, whichever ptd the request reached (live lines, not
// the store's copy); a finished build's, one of this host, of a lost host
// or naming none is answered here, as are the build's other routes. A
// building host that cannot be reached leaves the log to the store.
func TestBuildLogsGoToTheBuildingHost(t *testing.T) {
	f := newFixture(t)
	b := newPeer(t)
	f.register(t, "host_a", "http://a.invalid", 8192, "runc")
	f.register(t, "host_b", b.srv.URL, 8192, "runc")
	f.register(t, "host_gone", "http://gone.invalid", 8192, "runc")
	f.register(t, "host_down", "http://127.0.0.1:1", 8192, "runc") // refuses connections
	if _, err := f.st.SetHostState(context.Background(), "host_gone", 0, store.HostLost, "test"); err != nil {
		t.Fatal(err)
	}
	onB, doneOnB := f.buildOn(t, "host_b", store.BuildRunning), f.buildOn(t, "host_b", store.BuildReady)
	onA, onGone, onNone := f.buildOn(t, "host_a", store.BuildRunning), f.buildOn(t, "host_gone", store.BuildRunning), f.buildOn(t, "", store.BuildRunning)
	onDown := f.buildOn(t, "host_down", store.BuildRunning)
	for _, tc := range []struct {
		name, self string
		local      bool
	}{{"host a", "host_a", true}, {"api-only ptd", "api_1", false}} {
		t.Run(tc.name, func(t *testing.T) {
			h := forward.New(f.st, tc.self, tc.local, slog.New(slog.DiscardHandler)).Wrap(f.local)
			for _, c := range []struct {
				name, method, path string
				hdr                []string
				want               string
			}{
				{"running on b, followed", "GET", "/v1/templates/app/builds/" + onB + "/logs?follow=true", nil, "b"},
				{"running on b, read", "GET", "/v1/templates/app/builds/" + onB + "/logs", nil, "b"},
				{"running on b, the record", "GET", "/v1/templates/app/builds/" + onB, nil, "local"},
				{"running on b, sent by a peer", "GET", "/v1/templates/app/builds/" + onB + "/logs", []string{forward.Header, "host_c"}, "local"},
				{"finished on b", "GET", "/v1/templates/app/builds/" + doneOnB + "/logs?follow=true", nil, "local"},
				// a's own, or for the api-only ptd a host that does not answer
				{"running on a", "GET", "/v1/templates/app/builds/" + onA + "/logs", nil, "local"},
				{"running on a lost host", "GET", "/v1/templates/app/builds/" + onGone + "/logs", nil, "local"},
				{"naming no host", "GET", "/v1/templates/app/builds/" + onNone + "/logs", nil, "local"},
				{"on a host that does not answer", "GET", "/v1/templates/app/builds/" + onDown + "/logs", nil, "local"},
				{"unknown build", "GET", "/v1/templates/app/builds/tbld_01JNDX3V6Z9Q6N1S9Y8K7C2F3A/logs", nil, "local"},
			} {
				if w := send(h, c.method, c.path, "", c.hdr...); w.Header().Get("X-Peer") != map[string]string{"b": b.srv.URL, "local": "local"}[c.want] {
					t.Errorf("%s: served by %q (%d %s), want %s", c.name, w.Header().Get("X-Peer"), w.Code, w.Body, c.want)
				}
			}
		})
	}
	if got := b.requests(); len(got) != 4 || got[0].Header.Get(forward.Header) == "" || got[0].URL.RawQuery != "follow=true" {
		t.Fatalf("b got %d requests (first: %v), want the 2 log reads of each ptd, marked and as asked", len(got), got[0].URL)
	}
}

// TestRelayKeepsGRPCOnHTTP2: a gRPC call that reached a ptd over HTTP/2
// (a gRPC preview) reaches the sandbox's host over HTTP/2 too, its
// trailer coming back; anything else goes over HTTP/1.1.
func TestRelayKeepsGRPCOnHTTP2(t *testing.T) {
	h2c := func(h http.Handler) *httptest.Server {
		s := httptest.NewUnstartedServer(h)
		s.Config.Protocols = new(http.Protocols)
		s.Config.Protocols.SetHTTP1(true)
		s.Config.Protocols.SetUnencryptedHTTP2(true)
		s.Start()
		t.Cleanup(s.Close)
		return s
	}
	f := newFixture(t)
	b := h2c(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		w.Header().Set("Trailer", "Grpc-Status")
		fmt.Fprintf(w, "HTTP/%d got %s", req.ProtoMajor, body)
		w.Header().Set("Grpc-Status", "0")
	}))
	f.register(t, "host_a", "http://a.invalid", 8192, "runc")
	f.register(t, "host_b", b.URL, 8192, "runc")
	onB := f.sandboxOn(t, "host_b", 512)
	r := forward.New(f.st, "host_a", true, slog.New(slog.DiscardHandler))
	a := h2c(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !r.Relay(w, req, onB, "Pt-Test-Mark") {
			http.Error(w, "not relayed", http.StatusInternalServerError)
		}
	}))
	client := upstream.H2C(&http.Transport{})
	for _, tc := range []struct{ ctype, want string }{
		{"application/grpc", "HTTP/2 got ping"},
		{"text/plain", "HTTP/1 got ping"},
	} {
		req, _ := http.NewRequest("POST", a.URL+"/"+onB+"/50051/svc/Method", strings.NewReader("ping"))
		req.Header.Set("Content-Type", tc.ctype)
		req.Header.Set("TE", "trailers")
		resp, err := client.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != tc.want {
			t.Errorf("%s: %d %q, want %q", tc.ctype, resp.StatusCode, body, tc.want)
		}
		if tc.ctype == "application/grpc" && resp.Trailer.Get("Grpc-Status") != "0" {
			t.Errorf("%s: trailer Grpc-Status = %q, want 0", tc.ctype, resp.Trailer.Get("Grpc-Status"))
		}
	}
}
