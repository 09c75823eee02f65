package region

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// fakeStore knows the sandboxes in ids.
type fakeStore struct{ ids map[string]bool }

func (f fakeStore) GetSandbox(_ context.Context, _, id string) (sandbox.Sandbox, error) {
	if f.ids[id] {
		return sandbox.Sandbox{ID: id}, nil
	}
	return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", id, sandbox.ErrNotFound)
}

var _ Store = fakeStore{}

// region is a fake region's API: a list of rows (newest first), records
// by id, and what it was sent.
type region struct {
	name string
	rows []listRow

	mu   sync.Mutex
	seen []*http.Request
	body []string
}

type listRow struct {
	ID        string `json:"id"`
	CreatedAt string `json:"created_at"`
}

func (g *region) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	g.mu.Lock()
	g.seen, g.body = append(g.seen, r), append(g.body, string(b))
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/sandboxes":
		q := r.URL.Query()
		off, _ := strconv.Atoi(q.Get("offset"))
		lim, _ := strconv.Atoi(cmpOr(q.Get("limit"), "50"))
		out := map[string]any{"rows": g.rows[min(off, len(g.rows)):min(off+lim, len(g.rows))]}
		if q.Get("paginated") == "true" {
			out["total"] = len(g.rows)
		}
		json.NewEncoder(w).Encode(out)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/sandboxes/sbx_"):
		id := strings.Split(r.URL.Path, "/")[3]
		for _, row := range g.rows {
			if row.ID == id {
				json.NewEncoder(w).Encode(row)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"code":"not_found","error":"no such sandbox"}`)
	default:
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"region":%q}`, g.name)
	}
}

func (g *region) requests() []*http.Request {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*http.Request{}, g.seen...)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// setup is region "a" (local: served by the fake here, in-process) with
// peer "b" (over HTTP); a knows the ids of its own rows.
func setup(t *testing.T, local, peer *region) (http.Handler, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(peer)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	ids := map[string]bool{}
	for _, r := range local.rows {
		ids[r.ID] = true
	}
	r := New(local.name, []Peer{{Name: peer.name, URL: u}}, fakeStore{ids: ids}, slog.New(slog.DiscardHandler))
	r.AddCreates(Create{Path: "/compat/sandbox", Region: "target"}) // a surface's create naming its region otherwise
	return r.Wrap(local), srv
}

func do(t *testing.T, h http.Handler, method, target, body string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestCreate(t *testing.T) {
	tests := []struct {
		name, path, body, servedBy string
	}{
		{"peer region", "/v1/sandboxes", `{"template":"busybox","region":"b"}`, "b"},
		{"own region", "/v1/sandboxes", `{"template":"busybox","region":"a"}`, "a"},
		{"no region", "/v1/sandboxes", `{"template":"busybox"}`, "a"},
		{"unknown region: the API refuses it", "/v1/sandboxes", `{"template":"busybox","region":"z"}`, "a"},
		{"not JSON: the API refuses it", "/v1/sandboxes", `{`, "a"},
		{"region not a string: the API refuses it", "/v1/sandboxes", `{"region":["b"]}`, "a"},
		{"another create route, its field naming the peer", "/compat/sandbox", `{"target":"b"}`, "b"},
		{"another create route, /v1's field is not its own", "/compat/sandbox", `{"region":"b"}`, "a"},
		{"another create route naming no known region", "/compat/sandbox", `{"target":"eu"}`, "a"},
		{"a POST that is no create route", "/compat/other", `{"target":"b","region":"b"}`, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local, peer := &region{name: "a"}, &region{name: "b"}
			h, _ := setup(t, local, peer)
			rec := do(t, h, http.MethodPost, tt.path, tt.body, map[string]string{"Idempotency-Key": "k1"})
			served := map[string]*region{"a": local, "b": peer}[tt.servedBy]
			if len(served.body) != 1 || served.body[0] != tt.body {
				t.Fatalf("%s got bodies %q, want the create whole: %q", tt.servedBy, served.body, tt.body)
			}
			if rec.Code != http.StatusCreated {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			if tt.servedBy == "b" {
				got := peer.seen[0].Header
				if got.Get("Idempotency-Key") != "k1" || got.Get("Authorization") != "Bearer tok" || got.Get(Header) != "a" {
					t.Errorf("forwarded headers %v: want the key, the token and %s: a", got, Header)
				}
				if len(local.seen) != 0 {
					t.Errorf("region a served a create for b too")
				}
			}
		})
	}
}

func TestSandboxRequests(t *testing.T) {
	local := &region{name: "a", rows: []listRow{{"sbx_a1", "2026-12-04T12:00:00.000001Z"}}}
	peer := &region{name: "b", rows: []listRow{{"sbx_b1", "2026-12-04T12:00:00.000002Z"}}}
	h, _ := setup(t, local, peer)

	if rec := do(t, h, http.MethodGet, "/v1/sandboxes/sbx_a1", "", nil); rec.Code != http.StatusOK || len(peer.requests()) != 0 {
		t.Fatalf("own sandbox: %d, peer asked %d times; want served here, peer never asked", rec.Code, len(peer.requests()))
	}
	for range 2 {
		if rec := do(t, h, http.MethodPost, "/v1/sandboxes/sbx_b1/exec", `{"cmd":"true"}`, nil); rec.Code != http.StatusCreated {
			t.Fatalf("peer's sandbox: %d %s", rec.Code, rec.Body)
		}
	}
	var probes, execs int
	for _, r := range peer.requests() {
		switch {
		case r.Method == http.MethodGet:
			probes++
		case r.URL.Path == "/v1/sandboxes/sbx_b1/exec":
			execs++
		}
		if r.Header.Get(Header) != "a" {
			t.Errorf("%s %s reached b without %s", r.Method, r.URL, Header)
		}
	}
	if probes != 1 || execs != 2 {
		t.Errorf("b got %d look-ups and %d execs, want 1 (then cached) and 2", probes, execs)
	}
	// A request another region sent is never sent on.
	before := len(peer.requests())
	if rec := do(t, h, http.MethodGet, "/v1/sandboxes/sbx_b1", "", map[string]string{Header: "c"}); rec.Code != http.StatusNotFound {
		t.Fatalf("forwarded request: %d, want a's own 404", rec.Code)
	}
	if len(peer.requests()) != before {
		t.Error("a request forwarded from another region was forwarded again")
	}
	// Nobody has it: a's own answer.
	if rec := do(t, h, http.MethodGet, "/v1/sandboxes/sbx_none", "", nil); rec.Code != http.StatusNotFound {
		t.Fatalf("unknown sandbox: %d, want 404", rec.Code)
	}
}

func TestList(t *testing.T) {
	// Both regions' rows fall in one millisecond, a's and b's
	// interleaved by microsecond.
	var aRows, bRows, all []listRow
	for i := 9; i >= 0; i-- {
		r := listRow{fmt.Sprintf("sbx_%02d", i), fmt.Sprintf("2026-12-04T12:00:00.1230%02dZ", i)}
		all = append(all, r)
		if i%3 == 0 {
			bRows = append(bRows, r)
		} else {
			aRows = append(aRows, r)
		}
	}
	local, peer := &region{name: "a", rows: aRows}, &region{name: "b", rows: bRows}
	h, _ := setup(t, local, peer)
	for _, limit := range []int{1, 2, 3} {
		var walked []listRow
		for offset := 0; offset < len(all); offset += limit {
			rec := do(t, h, http.MethodGet, fmt.Sprintf("/v1/sandboxes?limit=%d&offset=%d&paginated=true", limit, offset), "", nil)
			var body struct {
				Rows  []listRow `json:"rows"`
				Total int       `json:"total"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusOK {
				t.Fatalf("list: %d %s", rec.Code, rec.Body)
			}
			if body.Total != len(all) {
				t.Fatalf("total %d, want %d (a's plus b's)", body.Total, len(all))
			}
			walked = append(walked, body.Rows...)
		}
		if diff := cmp.Diff(all, walked); diff != "" {
			t.Errorf("limit %d pages (-want +got):\n%s", limit, diff)
		}
	}
	for _, r := range append(local.requests(), peer.requests()...) {
		if r.Header.Get(Header) == "" {
			t.Errorf("list request %s reached a region without %s", r.URL, Header)
		}
	}
}

func TestListPagesThroughPeer(t *testing.T) {
	var rows []listRow
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for i := range 450 {
		rows = append(rows, listRow{fmt.Sprintf("sbx_%04d", 999-i), start.Add(-time.Duration(i) * time.Microsecond).Format(sandbox.TimeFormat)})
	}
	local, peer := &region{name: "a"}, &region{name: "b", rows: rows}
	h, _ := setup(t, local, peer)
	rec := do(t, h, http.MethodGet, "/v1/sandboxes?limit=50&offset=400", "", nil)
	var body struct{ Rows []listRow }
	json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != http.StatusOK || len(body.Rows) != 50 || body.Rows[0] != rows[400] {
		t.Fatalf("offset 400: %d, %d rows; want 50 from %v", rec.Code, len(body.Rows), rows[400])
	}
	var limits []string
	for _, r := range peer.requests() {
		limits = append(limits, r.URL.Query().Get("offset")+"+"+r.URL.Query().Get("limit"))
	}
	if diff := cmp.Diff([]string{"0+200", "200+200", "400+50"}, limits); diff != "" {
		t.Errorf("pages asked of b (-want +got):\n%s", diff)
	}
}

func TestPeerDown(t *testing.T) {
	local, peer := &region{name: "a", rows: []listRow{{"sbx_a1", "2026-12-04T12:00:00.000001Z"}}}, &region{name: "b"}
	h, srv := setup(t, local, peer)
	srv.Close()
	if rec := do(t, h, http.MethodGet, "/v1/sandboxes/sbx_a1", "", nil); rec.Code != http.StatusOK {
		t.Fatalf("own sandbox with b down: %d, want served here", rec.Code)
	}
	rec := do(t, h, http.MethodGet, "/v1/sandboxes/sbx_b1", "", nil)
	if !strings.Contains(rec.Body.String(), `"region_unavailable"`) || rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("a sandbox a does not have, with b down: %d %s, want 503 region_unavailable (not 404)", rec.Code, rec.Body)
	}
	rec = do(t, h, http.MethodGet, "/v1/sandboxes", "", nil)
	var body map[string]any
	json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != http.StatusServiceUnavailable || body["code"] != "region_unavailable" || body["region"] != "b" {
		t.Fatalf("list with b down: %d %s, want 503 region_unavailable naming b", rec.Code, rec.Body)
	}
}

// TestCreateChild: a create naming no region goes to the region of its
// parent_id (a child lives beside its parent); a named region wins, and a
// parent no region has is the local API's to refuse.
func TestCreateChild(t *testing.T) {
	tests := []struct {
		name, body, servedBy string
	}{
		{"parent in the peer region", `{"template":"busybox","parent_id":"sbx_b1"}`, "b"},
		{"parent here", `{"template":"busybox","parent_id":"sbx_a1"}`, "a"},
		{"parent nowhere: the API refuses it", `{"template":"busybox","parent_id":"sbx_zz"}`, "a"},
		{"a named region wins", `{"template":"busybox","parent_id":"sbx_b1","region":"a"}`, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local := &region{name: "a", rows: []listRow{{"sbx_a1", "2026-12-04T12:00:00.000001Z"}}}
			peer := &region{name: "b", rows: []listRow{{"sbx_b1", "2026-12-04T12:00:00.000002Z"}}}
			h, _ := setup(t, local, peer)
			rec := do(t, h, http.MethodPost, "/v1/sandboxes", tt.body, nil)
			if rec.Code != http.StatusCreated {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			served := map[string]*region{"a": local, "b": peer}[tt.servedBy]
			var creates []string
			for i, r := range served.requests() {
				if r.Method == http.MethodPost {
					creates = append(creates, served.body[i])
				}
			}
			if len(creates) != 1 || creates[0] != tt.body {
				t.Fatalf("%s got creates %q, want the create whole: %q", tt.servedBy, creates, tt.body)
			}
		})
	}

	local, peer := &region{name: "a"}, &region{name: "b"}
	h, srv := setup(t, local, peer)
	srv.Close()
	rec := do(t, h, http.MethodPost, "/v1/sandboxes", `{"template":"busybox","parent_id":"sbx_b1"}`, nil)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"region_unavailable"`) || len(local.requests()) != 0 {
		t.Fatalf("child of a parent a lacks, with b down: %d %s, want 503 region_unavailable and nothing made", rec.Code, rec.Body)
	}
}

// tokenStore knows sandboxes by id, each with its access token.
type tokenStore map[string]string

func (s tokenStore) GetSandbox(_ context.Context, _, id string) (sandbox.Sandbox, error) {
	if tok, ok := s[id]; ok {
		return sandbox.Sandbox{ID: id, AgentToken: tok}, nil
	}
	return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", id, sandbox.ErrNotFound)
}

// TestEnvdTraffic: envd requests (E2b-Sandbox-Id) carry the sandbox's
// access token, not a /v1 credential; region a finds b's sandbox by
// asking b's router with that token, and only the right token finds it.
func TestEnvdTraffic(t *testing.T) {
	local, peer := &region{name: "a"}, &region{name: "b"}
	// b is a router of its own in front of its API, as every ptd is.
	self, _ := url.Parse("http://127.0.0.1:1") // a, as b knows it: never asked here
	bRouter := New("b", []Peer{{Name: "a", URL: self}}, tokenStore{"sbx_b1": "tok-b1", "sbx_b2": "tok-b2", "sbx_b3": "tok-b3"}, slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(bRouter.Wrap(peer))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	h := New("a", []Peer{{Name: "b", URL: u}}, tokenStore{}, slog.New(slog.DiscardHandler)).Wrap(local)

	envd := func(id string, hdr map[string]string) int {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/process.Process/Start", strings.NewReader("{}"))
		req.Header.Set("E2b-Sandbox-Id", id)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	tests := []struct {
		name, id string
		hdr      map[string]string
		servedBy string
	}{
		{"wrong token", "sbx_b1", map[string]string{"X-Access-Token": "nope"}, "a"},
		{"no token", "sbx_b1", nil, "a"},
		{"unknown sandbox", "sbx_none", map[string]string{"X-Access-Token": "tok-b1"}, "a"},
		{"its token", "sbx_b1", map[string]string{"X-Access-Token": "tok-b1"}, "b"},
		// (A found sandbox is kept for a while: another one for this.)
		{"another port's traffic token", "sbx_b2-49999", map[string]string{"E2b-Traffic-Access-Token": "tok-b2"}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nl, np := len(local.requests()), len(peer.requests())
			envd(tt.id, tt.hdr)
			servedHere := len(local.requests()) > nl
			servedThere := false
			for _, r := range peer.requests()[np:] {
				if r.URL.Path == "/process.Process/Start" {
					servedThere = true
				}
			}
			if got := map[bool]string{true: "a", false: "b"}[servedHere]; got != tt.servedBy || servedHere == servedThere {
				t.Errorf("served by a %v, by b %v; want only %s", servedHere, servedThere, tt.servedBy)
			}
		})
	}
	// envd traffic on a list's path is its sandbox's, not a list.
	req := httptest.NewRequest(http.MethodGet, "/v1/sandboxes", nil)
	req.Header.Set("E2b-Sandbox-Id", "sbx_b3")
	req.Header.Set("X-Access-Token", "tok-b3")
	np := len(peer.requests())
	h.ServeHTTP(httptest.NewRecorder(), req)
	if got := peer.requests()[np:]; len(got) != 1 || got[0].URL.RawQuery != "" || got[0].Header.Get("E2b-Sandbox-Id") != "sbx_b3" {
		t.Errorf("envd GET /v1/sandboxes of b's sandbox: b saw %d requests, want it once as it came", len(got))
	}
	// The look-up itself never reaches b's API: b's router answers it.
	for _, r := range peer.requests() {
		if strings.HasPrefix(r.URL.Path, lookupPath) {
			t.Errorf("b's API saw the look-up %s", r.URL)
		}
	}
	// Without a peer, the look-up path is nobody's: a router without
	// peers is its handler itself.
	if h := New("b", nil, tokenStore{"sbx_b1": "tok-b1"}, nil).Wrap(peer); h != http.Handler(peer) {
		t.Error("a router without peers is not its handler")
	}
}

// TestListRefusals: a region's answer other than 200 to a list is passed
// on as it came, naming the region; a query the surface refuses never
// reaches a peer.
func TestListRefusals(t *testing.T) {
	// things is a surface's list: each region answers its names, joined.
	things := NewList(http.MethodGet, "/things",
		func(in *http.Request) bool { return in.URL.Query().Get("bad") == "" },
		func(in *http.Request, get Get) (string, error) {
			b, _, err := get(in.URL.Query())
			return string(b), err
		},
		func(w http.ResponseWriter, _ *http.Request, parts []string) { fmt.Fprint(w, strings.Join(parts, ",")) })
	serve := func(name string, status int) (http.Handler, *atomic.Int32) {
		var n atomic.Int32
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			if r.Header.Get(Header) == "" && r.URL.Query().Get("bad") == "" {
				t.Errorf("%s asked for %s without %s", name, r.URL, Header)
			}
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(status)
			fmt.Fprint(w, name)
		}), &n
	}
	tests := []struct {
		name               string
		query              string
		localSt, peerSt    int
		wantCode           int
		wantBody, wantFrom string
		peerAsked          bool
	}{
		{"both answer", "", 200, 200, 200, "a,b", "", true},
		{"peer refuses", "", 200, 401, 401, "b", "b", true},
		{"this region refuses", "", 403, 200, 403, "a", "a", true},
		{"bad query: this region alone", "bad=1", 400, 200, 400, "a", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local, _ := serve("a", tt.localSt)
			peer, asked := serve("b", tt.peerSt)
			srv := httptest.NewServer(peer)
			t.Cleanup(srv.Close)
			u, _ := url.Parse(srv.URL)
			r := New("a", []Peer{{Name: "b", URL: u}}, fakeStore{}, slog.New(slog.DiscardHandler))
			r.AddLists(things)
			rec := do(t, r.Wrap(local), http.MethodGet, "/things?"+tt.query, "", nil)
			if rec.Code != tt.wantCode || rec.Body.String() != tt.wantBody || rec.Header().Get("Pt-Region") != tt.wantFrom {
				t.Errorf("%d %q from %q, want %d %q from %q", rec.Code, rec.Body, rec.Header().Get("Pt-Region"), tt.wantCode, tt.wantBody, tt.wantFrom)
			}
			if got := asked.Load() > 0; got != tt.peerAsked {
				t.Errorf("peer asked %v, want %v", got, tt.peerAsked)
			}
		})
	}
}

// TestAPIKeyLookUp: E2B's calls carry the token as X-API-Key only; the
// look-up of their sandbox in a peer asks /v1 with it as a bearer, which
// is what /v1 takes, and the call itself goes on as it came.
func TestAPIKeyLookUp(t *testing.T) {
	local := &region{name: "a"}
	peer := &region{name: "b", rows: []listRow{{"sbx_b1", "2026-12-04T12:00:00.000002Z"}}}
	h, _ := setup(t, local, peer)
	req := httptest.NewRequest(http.MethodPost, "/v2/sandboxes/sbx_b1/connect", strings.NewReader(`{"timeout":60}`))
	req.Header.Set("X-API-Key", "key1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	seen := peer.requests()
	if rec.Code != http.StatusCreated || len(seen) != 2 || len(local.requests()) != 0 {
		t.Fatalf("connect of b's sandbox: %d, b saw %d requests, a %d; want it forwarded after one look-up", rec.Code, len(seen), len(local.requests()))
	}
	if got := seen[0].Header.Get("Authorization"); seen[0].Method != http.MethodGet || got != "Bearer key1" {
		t.Errorf("look-up %s %s with Authorization %q, want GET with Bearer key1", seen[0].Method, seen[0].URL, got)
	}
	if got := seen[1].Header; got.Get("X-Api-Key") != "key1" || got.Get("Authorization") != "" {
		t.Errorf("forwarded connect's credentials %v, want X-API-Key as it came", got)
	}
}
