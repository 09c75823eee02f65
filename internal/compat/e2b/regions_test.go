package e2b

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/region"
	"github.com/platinum-dev/platinum/internal/region/regiontest"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// fakeRegion answers E2B's lists from its sandboxes with the list code
// one ptd runs, and counts what it was asked.
type fakeRegion struct {
	h     *Handler
	all   []sandbox.Sandbox
	asked atomic.Int32
}

func (f *fakeRegion) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.asked.Add(1)
	lq, err := listQueryOf(r.URL.Query(), r.URL.Path == "/v2/sandboxes")
	if err != nil {
		http.Error(w, `{"code":400,"message":"bad"}`, http.StatusBadRequest)
		return
	}
	f.h.writeList(w, slices.Clone(f.all), lq)
}

func TestRegionLists(t *testing.T) {
	h := &Handler{cfg: DefaultConfig()}
	base := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	// Three regions; some sandboxes start at the same microsecond in two
	// regions (the id decides), one restarted later than all.
	regions := []*fakeRegion{{h: h}, {h: h}, {h: h}}
	var all []sandbox.Sandbox
	for i := range 10 {
		sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), State: sandbox.StateRunning, Template: "busybox",
			CreatedAt: base.Add(time.Duration(i/2) * time.Microsecond)}
		switch i {
		case 3:
			sb.State = sandbox.StateStopped // paused
		case 4:
			sb.LastStart = &sandbox.LastStart{At: base.Add(time.Hour)}
		}
		regions[i%3].all = append(regions[i%3].all, sb)
		all = append(all, sb)
	}
	// The oldest few are all in one region: the last pages come from it
	// alone, and only its token says more follow.
	for i := range 3 {
		sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), State: sandbox.StateRunning, Template: "busybox",
			CreatedAt: base.Add(-time.Duration(i+1) * time.Second)}
		regions[2].all = append(regions[2].all, sb)
		all = append(all, sb)
	}
	peers := regiontest.Peers(t, regions[1], regions[2])
	api := regiontest.Router("r0", regions[0], peers, RegionLists()...)

	get := func(target string) ([]string, http.Header, int) {
		t.Helper()
		w := httptest.NewRecorder()
		api.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
		var rows []detailView
		json.Unmarshal(w.Body.Bytes(), &rows)
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.SandboxID)
		}
		return ids, w.Header(), w.Code
	}
	// want is one region's answer over every region's sandboxes.
	want := func(target string) []string {
		t.Helper()
		u, _ := url.Parse(target)
		one := &fakeRegion{h: h, all: all}
		w := httptest.NewRecorder()
		one.ServeHTTP(w, httptest.NewRequest(http.MethodGet, u.Path+"?"+u.RawQuery, nil))
		var rows []detailView
		json.Unmarshal(w.Body.Bytes(), &rows)
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.SandboxID)
		}
		return ids
	}
	for _, target := range []string{"/sandboxes", "/sandboxes?state=running,paused", "/sandboxes?order=asc&state=paused",
		"/v2/sandboxes", "/v2/sandboxes?order=asc", "/v2/sandboxes?state=paused", "/v2/sandboxes?limit=100"} {
		got, _, code := get(target)
		if d := cmp.Diff(want(target), got); d != "" || code != http.StatusOK || len(got) == 0 {
			t.Errorf("%s: %d (-one region +merged):\n%s", target, code, d)
		}
	}
	// Walking pages of every size, in both orders, yields the one-region
	// order once: the token goes on across regions.
	for _, order := range []string{"desc", "asc"} {
		full := want("/v2/sandboxes?order=" + order)
		if len(full) != 13 { // running and paused, by default
			t.Fatalf("order %s: %d rows, want 13", order, len(full))
		}
		for limit := 1; limit <= 4; limit++ {
			var got []string
			q := fmt.Sprintf("/v2/sandboxes?order=%s&limit=%d", order, limit)
			for range 20 {
				page, hdr, code := get(q)
				if code != http.StatusOK || len(page) > limit {
					t.Fatalf("%s: %d, %d rows", q, code, len(page))
				}
				got = append(got, page...)
				next := hdr.Get("X-Next-Token")
				if next == "" {
					break
				}
				q = fmt.Sprintf("/v2/sandboxes?order=%s&limit=%d&nextToken=%s", order, limit, next)
			}
			if d := cmp.Diff(full, got); d != "" {
				t.Errorf("order %s limit %d (-want +got):\n%s", order, limit, d)
			}
		}
	}
	// Bad input is refused by this region alone.
	before := regions[1].asked.Load()
	if _, _, code := get("/v2/sandboxes?limit=0"); code != http.StatusBadRequest {
		t.Errorf("limit=0: %d, want 400", code)
	}
	if regions[1].asked.Load() != before {
		t.Error("a bad query reached a peer")
	}
}

func TestRegionListPeerDown(t *testing.T) {
	h := &Handler{cfg: DefaultConfig()}
	srv := httptest.NewServer(http.NotFoundHandler())
	u, _ := url.Parse(srv.URL)
	srv.Close()
	api := regiontest.Router("a", &fakeRegion{h: h}, []region.Peer{{Name: "b", URL: u}}, RegionLists()...)
	for _, target := range []string{"/sandboxes", "/v2/sandboxes"} {
		w := httptest.NewRecorder()
		api.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
		var body struct{ Code, Region string }
		json.Unmarshal(w.Body.Bytes(), &body)
		if w.Code != http.StatusServiceUnavailable || body.Code != "region_unavailable" || body.Region != "b" || w.Header().Get("Retry-After") == "" {
			t.Errorf("%s with b down: %d %s", target, w.Code, w.Body)
		}
	}
}

// metricsRegion answers batch metrics for the sandboxes it holds.
type metricsRegion struct {
	ids   []string
	asked atomic.Int32
}

func (m *metricsRegion) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.asked.Add(1)
	ids, err := metricsIDs(r.URL.Query())
	if err != nil {
		http.Error(w, `{"code":400,"message":"bad"}`, http.StatusBadRequest)
		return
	}
	out := map[string]metricView{}
	for _, id := range ids {
		if slices.Contains(m.ids, id) {
			out[id] = metricView{CPUCount: len(id)}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
}

func TestRegionBatchMetrics(t *testing.T) {
	regions := []*metricsRegion{{ids: []string{"sbx_a1"}}, {ids: []string{"sbx_b1", "sbx_b2"}}, {}}
	peers := regiontest.Peers(t, regions[1], regions[2])
	api := regiontest.Router("r0", regions[0], peers, RegionLists()...)
	get := func(target string) (map[string]metricView, int) {
		w := httptest.NewRecorder()
		api.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
		var body struct{ Sandboxes map[string]metricView }
		json.Unmarshal(w.Body.Bytes(), &body)
		return body.Sandboxes, w.Code
	}
	got, code := get("/sandboxes/metrics?sandbox_ids=sbx_a1,sbx_b2,sbx_gone")
	want := map[string]metricView{"sbx_a1": {CPUCount: 6}, "sbx_b2": {CPUCount: 6}}
	if d := cmp.Diff(want, got); d != "" || code != http.StatusOK {
		t.Errorf("%d (-want +got):\n%s", code, d)
	}
	before := regions[1].asked.Load()
	if _, code := get("/sandboxes/metrics?sandbox_ids=,"); code != http.StatusBadRequest {
		t.Errorf("no ids: %d, want 400", code)
	}
	if regions[1].asked.Load() != before {
		t.Error("a bad query reached a peer")
	}
}

// snapshotRegion answers E2B's snapshot list from its snapshots with the
// list code one ptd runs: a sandboxID it does not hold is 404.
type snapshotRegion struct {
	snaps []sandbox.Snapshot
	asked atomic.Int32
}

func (s *snapshotRegion) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.asked.Add(1)
	q := r.URL.Query()
	sq, err := parseSnapshotQuery(q)
	if err != nil {
		http.Error(w, `{"code":400,"message":"bad"}`, http.StatusBadRequest)
		return
	}
	var rows []sandbox.Snapshot
	for _, sn := range s.snaps {
		if id := q.Get("sandboxID"); id == "" || sn.SandboxID == id {
			rows = append(rows, sn)
		}
	}
	if q.Get("sandboxID") != "" && len(rows) == 0 {
		http.Error(w, `{"code":404,"message":"sandbox not found"}`, http.StatusNotFound)
		return
	}
	writeSnapshots(w, rows, sq)
}

// TestRegionSnapshots: GET /snapshots answers every region's snapshots
// newest first (ID order), paged by one token across regions, each once;
// a name filter holds in every region; a sandboxID names the one region
// holding it (the others' 404s are no rows), and one no region holds is
// 404; a bad query never reaches a peer.
func TestRegionSnapshots(t *testing.T) {
	regions := []*snapshotRegion{{}, {}, {}}
	var want []string // newest first
	for i := range 9 {
		sn := sandbox.Snapshot{ID: sandbox.NewID(sandbox.PrefixSnapshot), SandboxID: fmt.Sprint("sbx_r", i%3), Kind: sandbox.KindSnapshot,
			State: sandbox.SnapshotReady, Name: fmt.Sprint("n", i%2)}
		if i == 4 {
			sn.State = sandbox.SnapshotCreating // not listed
		}
		regions[i%3].snaps = append(regions[i%3].snaps, sn)
		if sn.State == sandbox.SnapshotReady {
			want = append([]string{sn.ID}, want...)
		}
	}
	peers := regiontest.Peers(t, regions[1], regions[2])
	api := regiontest.Router("r0", regions[0], peers, RegionLists()...)
	get := func(target string) ([]string, string, int) {
		t.Helper()
		w := httptest.NewRecorder()
		api.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
		var rows []snapshotView
		json.Unmarshal(w.Body.Bytes(), &rows)
		ids := []string{}
		for _, r := range rows {
			ids = append(ids, r.SnapshotID)
		}
		return ids, w.Header().Get("X-Next-Token"), w.Code
	}

	if got, next, code := get("/snapshots"); code != 200 || next != "" || !slices.Equal(got, want) {
		t.Fatalf("every region's snapshots: %d %v next %q, want %v", code, got, next, want)
	}
	var paged []string
	for token, pages := "", 0; ; pages++ {
		q := url.Values{"limit": {"3"}}
		if token != "" {
			q.Set("nextToken", token)
		}
		got, next, code := get("/snapshots?" + q.Encode())
		if code != 200 || len(got) > 3 || pages > len(want) {
			t.Fatalf("page %d: %d %v", pages, code, got)
		}
		paged = append(paged, got...)
		if next == "" {
			break
		}
		token = next
	}
	if !slices.Equal(paged, want) {
		t.Fatalf("paged by 3 across regions: %v, want %v", paged, want)
	}
	named, _, _ := get("/snapshots?name=n1")
	if len(named) != 4 {
		t.Errorf("name n1 across regions: %v, want the 4 of them", named)
	}
	if got, _, code := get("/snapshots?sandboxID=sbx_r2"); code != 200 || len(got) != 3 {
		t.Errorf("a peer region's sandbox's snapshots: %d %v", code, got)
	}
	if _, _, code := get("/snapshots?sandboxID=sbx_gone"); code != http.StatusNotFound {
		t.Errorf("a sandbox no region holds: %d, want 404", code)
	}
	before := regions[1].asked.Load()
	for _, q := range []string{"limit=0", "nextToken=bogus"} {
		if _, _, code := get("/snapshots?" + q); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, code)
		}
	}
	if regions[1].asked.Load() != before {
		t.Error("a bad query reached a peer")
	}
}
