package daytona

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/region/regiontest"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// fakeRegion answers Daytona's list from its sandboxes with the list
// code one ptd runs.
type fakeRegion struct{ all []sandboxDTO }

func (f *fakeRegion) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lf, err := parseListFilter(r.URL.Query())
	if err != nil {
		http.Error(w, `{"statusCode":400}`, http.StatusBadRequest)
		return
	}
	var all []sandboxDTO
	for _, d := range f.all {
		if lf.match(d) {
			all = append(all, d)
		}
	}
	writePage(w, lf, all)
}

func TestRegionLists(t *testing.T) {
	base := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	regions := []*fakeRegion{{}, {}, {}}
	var all []sandboxDTO
	for i := range 12 {
		d := sandboxDTO{ID: sandbox.NewID(sandbox.PrefixSandbox), Name: fmt.Sprint("n", (i*7)%12), CPU: 1 + i%3,
			State: "started", CreatedAt: isoTime(base.Add(time.Duration(i/2) * time.Millisecond))}
		if i < 4 {
			d.State = "stopped"
		}
		// The newest rows are all in one region: the first pages come
		// from it alone.
		r := i % 3
		if i >= 8 {
			r, d.State = 2, "archived" // and only it has archived ones
		}
		regions[r].all = append(regions[r].all, d)
		all = append(all, d)
	}
	peers := regiontest.Peers(t, regions[1], regions[2])
	api := regiontest.Router("r0", regions[0], peers, RegionLists()...)

	type page struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
		NextCursor *string `json:"nextCursor"`
	}
	get := func(h http.Handler, target string) (page, int) {
		t.Helper()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
		var p page
		json.Unmarshal(w.Body.Bytes(), &p)
		return p, w.Code
	}
	ids := func(p page) []string {
		var out []string
		for _, it := range p.Items {
			out = append(out, it.ID)
		}
		return out
	}
	one := &fakeRegion{all: all} // one region with every sandbox
	for _, q := range []string{"", "order=asc", "sort=name&order=asc", "sort=cpu", "states=stopped", "limit=200"} {
		for _, path := range []string{APIPrefix + "/sandbox", APIPrefix + "/sandbox/paginated"} {
			want, _ := get(one, path+"?"+q)
			got, code := get(api, path+"?"+q)
			if d := cmp.Diff(ids(want), ids(got)); d != "" || code != http.StatusOK || len(got.Items) == 0 || got.NextCursor != nil {
				t.Errorf("%s?%s: %d (-one region +merged):\n%s", path, q, code, d)
			}
		}
	}
	// Walking cursor pages yields the one-region order once.
	for _, q := range []string{"", "sort=name&order=asc", "sort=cpu&order=asc", "states=archived"} {
		full, _ := get(one, APIPrefix+"/sandbox?"+q)
		for limit := 1; limit <= 5; limit++ {
			var got []string
			cursor := "0"
			for range 20 {
				p, code := get(api, fmt.Sprintf("%s/sandbox?%s&limit=%d&cursor=%s", APIPrefix, q, limit, cursor))
				if code != http.StatusOK || len(p.Items) > limit {
					t.Fatalf("%q limit %d cursor %s: %d, %d items", q, limit, cursor, code, len(p.Items))
				}
				got = append(got, ids(p)...)
				if p.NextCursor == nil {
					break
				}
				cursor = *p.NextCursor
			}
			if d := cmp.Diff(ids(full), got); d != "" {
				t.Errorf("%q limit %d (-want +got):\n%s", q, limit, d)
			}
		}
	}
	if _, code := get(api, APIPrefix+"/sandbox?limit=201"); code != http.StatusBadRequest {
		t.Errorf("limit=201: %d, want 400", code)
	}
	// A peer down makes the list 503 region_unavailable naming it.
	peers[1].URL, _ = url.Parse("http://127.0.0.1:1")
	w := httptest.NewRecorder()
	regiontest.Router("r0", regions[0], peers, RegionLists()...).ServeHTTP(w, httptest.NewRequest(http.MethodGet, APIPrefix+"/sandbox", nil))
	var body struct{ Code, Region string }
	json.Unmarshal(w.Body.Bytes(), &body)
	if w.Code != http.StatusServiceUnavailable || body.Code != "region_unavailable" || body.Region != "r2" {
		t.Errorf("r2 down: %d %s", w.Code, w.Body)
	}
}
