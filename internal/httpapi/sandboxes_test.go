package httpapi

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCreateWithoutWaitIs201Creating: a create that does not ask to wait
// answers 201 at once with the record in "creating" (the host here never
// finishes a start until released).
func TestCreateWithoutWaitIs201Creating(t *testing.T) {
	srv, _, tok := newServer(t)
	resp, m := call(t, srv, tok, "POST", "/v1/sandboxes", `{"template":"busybox"}`)
	if resp.StatusCode != 201 || m["state"] != "creating" || m["wait_timed_out"] != nil || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("create without wait: %d %v %v", resp.StatusCode, resp.Header, m)
	}
	if id, _ := m["id"].(string); !strings.HasPrefix(id, "sbx_") {
		t.Errorf("id = %v, want sbx_…", m["id"])
	}
}

// sixDigitUTC is an ISO 8601 UTC time with exactly six fractional digits.
var sixDigitUTC = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

// TestListPagesAndOrder: GET /v1/sandboxes answers {rows: […]}, 50 rows
// unless limit says otherwise (1 to 200), offset pages, newest first by
// created_at then id, created_at in UTC with six fractional digits.
func TestListPagesAndOrder(t *testing.T) {
	srv, _, tok := newServer(t)
	const n = 55
	for i := 0; i < n; i++ {
		if resp, m := call(t, srv, tok, "POST", "/v1/sandboxes", `{"template":"busybox"}`); resp.StatusCode != 201 {
			t.Fatalf("create %d: %d %v", i, resp.StatusCode, m)
		}
	}
	type row struct{ id, createdAt string }
	page := func(query string) []row {
		t.Helper()
		resp, m := call(t, srv, tok, "GET", "/v1/sandboxes"+query, "")
		if resp.StatusCode != 200 {
			t.Fatalf("list%s: %d %v", query, resp.StatusCode, m)
		}
		rows, ok := m["rows"].([]any)
		if !ok {
			t.Fatalf("list%s: no rows array: %v", query, m)
		}
		var out []row
		for _, r := range rows {
			r := r.(map[string]any)
			ca, _ := r["created_at"].(string)
			if !sixDigitUTC.MatchString(ca) {
				t.Errorf("created_at %q is not UTC with six fractional digits", ca)
			}
			out = append(out, row{r["id"].(string), ca})
		}
		return out
	}
	all := page("?limit=200")
	if len(all) != n {
		t.Fatalf("limit=200: %d rows, want %d", len(all), n)
	}
	sorted := slices.IsSortedFunc(all, func(a, b row) int {
		if c := strings.Compare(b.createdAt, a.createdAt); c != 0 {
			return c
		}
		return strings.Compare(b.id, a.id)
	})
	if !sorted {
		t.Errorf("rows are not ordered by created_at desc, id desc: %v", all)
	}
	for _, tc := range []struct {
		query string
		want  []row
	}{
		{"", all[:50]},
		{"?limit=7", all[:7]},
		{"?offset=50", all[50:]},
		{"?limit=3&offset=10", all[10:13]},
		{"?offset=" + fmt.Sprint(n), nil},
		{"?state=creating&limit=200", all},
		{"?state=running", nil},
	} {
		if got := page(tc.query); !slices.Equal(got, tc.want) {
			t.Errorf("list%s: %d rows %v, want %d", tc.query, len(got), got, len(tc.want))
		}
	}
	for _, q := range []string{"?limit=0", "?limit=201", "?limit=x", "?offset=-1", "?state=bogus"} {
		if resp, m := call(t, srv, tok, "GET", "/v1/sandboxes"+q, ""); resp.StatusCode != 400 || m["code"] != "invalid_request" {
			t.Errorf("list%s: %d %v, want 400 invalid_request", q, resp.StatusCode, m)
		}
	}
}

// TestCreateWaitBodyField: "wait": true in the body waits like
// ?wait_for_state=running — 202 with wait_timed_out and Retry-After when
// the wait runs out while provisioning, 201 running once it gets there.
func TestCreateWaitBodyField(t *testing.T) {
	srv, h, tok := newServer(t)
	resp, m := call(t, srv, tok, "POST", "/v1/sandboxes?wait_timeout_ms=100", `{"template":"busybox","wait":true}`)
	if resp.StatusCode != 202 || m["wait_timed_out"] != true || m["state"] != "creating" || resp.Header.Get("Retry-After") != "5" || m["id"] == nil {
		t.Fatalf("wait:true that runs out: %d %v %v", resp.StatusCode, resp.Header, m)
	}
	close(h.release)
	resp, m = call(t, srv, tok, "POST", "/v1/sandboxes?wait_timeout_ms=10000", `{"template":"busybox","wait":true}`)
	if resp.StatusCode != 201 || m["state"] != "running" || m["wait_timed_out"] != nil {
		t.Fatalf("wait:true: %d %v", resp.StatusCode, m)
	}
}

// TestCreateUnknownRegion: a create naming a region this ptd does not
// know (here it has none) is 400 unknown_region naming the field, and
// nothing is created; an empty region is the ptd's own.
func TestCreateUnknownRegion(t *testing.T) {
	srv, _, tok := newServer(t)
	resp, m := call(t, srv, tok, "POST", "/v1/sandboxes", `{"template":"busybox","region":"eu-west"}`)
	if resp.StatusCode != 400 || m["code"] != "unknown_region" || m["field"] != "region" {
		t.Fatalf("create in an unknown region: %d %v, want 400 unknown_region", resp.StatusCode, m)
	}
	if _, l := call(t, srv, tok, "GET", "/v1/sandboxes?paginated=true", ""); l["total"] != float64(0) {
		t.Fatalf("after the refused create: %v, want no sandbox", l)
	}
	if resp, m := call(t, srv, tok, "POST", "/v1/sandboxes", `{"template":"busybox","region":""}`); resp.StatusCode != 201 || m["region"] != nil {
		t.Fatalf("create with an empty region: %d %v, want 201 without a region", resp.StatusCode, m)
	}
}
