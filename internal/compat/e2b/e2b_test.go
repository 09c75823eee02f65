package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// The handlers themselves are tested against a real ptd in
// tests/compat/e2b; these tests cover the pure mapping.

func TestIsE2B(t *testing.T) {
	for _, tc := range []struct {
		method, path, sandboxHeader string
		want                        bool
	}{
		{"POST", "/v2/sandboxes", "", true},
		{"POST", "/sandboxes", "", true},
		{"GET", "/sandboxes/sbx_1/metrics", "", true},
		{"GET", "/snapshots", "", true},
		{"DELETE", "/templates/x", "", true},
		{"GET", "/health", "", true},
		{"POST", "/process.Process/Start", "sbx_1", true},
		{"GET", "/files", "sbx_1", true},
		{"GET", "/v1/sandboxes", "sbx_1", true}, // the header wins: envd traffic
		{"GET", "/v1/sandboxes", "", false},
		{"GET", "/healthz", "", false},
		{"GET", "/v1/openapi.json", "", false},
		{"GET", "/sandboxesx", "", false},
		{"GET", "/", "", false},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		if tc.sandboxHeader != "" {
			r.Header.Set("E2b-Sandbox-Id", tc.sandboxHeader)
		}
		if got := IsE2B(r); got != tc.want {
			t.Errorf("IsE2B(%s %s, header %q) = %v, want %v", tc.method, tc.path, tc.sandboxHeader, got, tc.want)
		}
	}
}

func TestMountKeepsNativeRoutes(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Native", "1")
		w.WriteHeader(http.StatusTeapot)
	})
	h := Mount(next, nil, nil, slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		method, path string
		status       int
		native       bool
		body         string
	}{
		{"GET", "/healthz", http.StatusTeapot, true, ""},
		{"GET", "/v1/sandboxes", http.StatusTeapot, true, ""},
		{"GET", "/health", http.StatusNoContent, false, ""},
		{"GET", "/sandboxes/sbx_1/nope", http.StatusNotFound, false, `{"code":404,"message":"no E2B route GET /sandboxes/sbx_1/nope"}`},
		{"PATCH", "/v2/sandboxes", http.StatusMethodNotAllowed, false, `{"code":405,"message":"method PATCH is not allowed on /v2/sandboxes"}`},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.status || (rec.Header().Get("X-Native") == "1") != tc.native {
			t.Errorf("%s %s: %d native=%q, want %d native=%v", tc.method, tc.path, rec.Code, rec.Header().Get("X-Native"), tc.status, tc.native)
		}
		if tc.body != "" && strings.TrimSpace(rec.Body.String()) != tc.body {
			t.Errorf("%s %s: body %s, want %s", tc.method, tc.path, rec.Body, tc.body)
		}
		// Both surfaces answer with a request id; E2B's bodies keep E2B's
		// shape (the exact bodies above).
		if rec.Header().Get("X-Request-Id") == "" {
			t.Errorf("%s %s: no X-Request-Id", tc.method, tc.path)
		}
	}
	req := httptest.NewRequest("GET", "/health", nil)
	req.Header.Set("X-Request-Id", "client-chosen-1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if got := rec.Header().Get("X-Request-Id"); got != "client-chosen-1" {
		t.Errorf("E2B answer's X-Request-Id = %q, want the client's", got)
	}
}

func TestE2BState(t *testing.T) {
	want := map[sandbox.State]string{
		sandbox.StateRunning: "running", sandbox.StateStarting: "paused", sandbox.StateStopping: "paused",
		sandbox.StateStopped: "paused", sandbox.StateArchiving: "paused", sandbox.StateArchived: "paused",
		sandbox.StateRestoring: "paused",
		sandbox.StateCreating:  "", sandbox.StateFailed: "", sandbox.StateDeleting: "", sandbox.StateDeleted: "",
	}
	for _, s := range sandbox.AllStates {
		got, ok := e2bState(s)
		if got != want[s] || ok != (want[s] != "") {
			t.Errorf("e2bState(%s) = %q, %v; want %q", s, got, ok, want[s])
		}
	}
}

func TestErrorStatus(t *testing.T) {
	for _, tc := range []struct {
		err        error
		status     int
		errorCode  string
		retryAfter int
	}{
		{fmt.Errorf("sandbox %q: %w", "x", sandbox.ErrNotFound), 404, "", 0},
		{&sandbox.FieldError{Field: "env", Reason: "bad"}, 400, "", 0},
		{fmt.Errorf("x: %w", sandbox.ErrUnauthenticated), 401, "", 0},
		{&controlplane.StateError{State: sandbox.StateCreating}, 409, "", 0},
		{fmt.Errorf("x: %w", sandbox.ErrUnavailable), 503, "", 5},
		{notReady(sandbox.Sandbox{ID: "sbx_1", State: sandbox.StateCreating}, "create"), 503, "sandbox_not_ready", 1},
		{notReady(sandbox.Sandbox{ID: "sbx_1", State: sandbox.StateFailed, Reason: "boom"}, "create"), 500, "sandbox_create_failed", 0},
		{&sandbox.QuotaError{Limit: "max_sandboxes", Max: 2}, 429, "", 0},
		{&controlplane.NoSpaceError{Free: 1 << 20, Min: 512 << 20}, 507, "", 0},
		{errors.New("disk on fire"), 500, "internal_server_error", 0},
	} {
		status, body, retry := errorStatus(tc.err)
		if status != tc.status || body.Code != tc.status || body.ErrorCode != tc.errorCode || retry != tc.retryAfter || body.Message == "" {
			t.Errorf("errorStatus(%v) = %d %+v retry %d; want %d %q retry %d", tc.err, status, body, retry, tc.status, tc.errorCode, tc.retryAfter)
		}
		if status == 500 && strings.Contains(body.Message, "disk on fire") {
			t.Errorf("internal cause leaked to the client: %q", body.Message)
		}
	}
}

func TestUnsupportedCreateOptions(t *testing.T) {
	for _, tc := range []struct {
		body string
		want string // "" = accepted
	}{
		{`{"templateID":"base"}`, ""},
		{`{"templateID":"base","allow_internet_access":true,"autoPause":true,"autoResume":{"enabled":false},"mcp":null,"network":{"allowPublicTraffic":true}}`, ""},
		{`{"templateID":"base","allow_internet_access":false}`, ""},
		{`{"templateID":"base","autoPause":true,"autoResume":{"enabled":true}}`, ""},
		{`{"templateID":"base","autoPauseMemory":false}`, "autoPauseMemory"},
		{`{"templateID":"base","volumeMounts":[{"name":"v","path":"/data"}]}`, "volumeMounts"},
		{`{"templateID":"base","mcp":{"x":{}}}`, "mcp"},
		{`{"templateID":"base","network":{"allowOut":["1.1.1.1"],"denyOut":["0.0.0.0/0"]}}`, ""},
		{`{"templateID":"base","network":{"rules":{"api.example.com":{}}}}`, "egress"},
		{`{"templateID":"base","network":{"allowPublicTraffic":false}}`, "allowPublicTraffic"},
	} {
		var n newSandbox
		if err := json.Unmarshal([]byte(tc.body), &n); err != nil {
			t.Fatal(err)
		}
		err := n.unsupported()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.body, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one naming %s", tc.body, err, tc.want)
		}
	}
}

func TestParseMetadataFilter(t *testing.T) {
	// What the SDK sends for {a: 'b c', 'k&': '=v'}: each side
	// encodeURIComponent'd, joined with URLSearchParams, then the whole
	// string is one query parameter.
	sdk := url.Values{"a": {url.PathEscape("b c")}, url.QueryEscape("k&"): {url.QueryEscape("=v")}}.Encode()
	got, err := parseMetadataFilter(sdk)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"a": "b c", "k&": "=v"}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := parseMetadataFilter("a=%zz"); err == nil {
		t.Error("bad encoding accepted")
	}
}

func TestParseListQueryErrors(t *testing.T) {
	for _, q := range []string{"state=sleeping", "order=up", "limit=0", "limit=101", "limit=x", "nextToken=abc", "startedAfter=yesterday"} {
		v, _ := url.ParseQuery(q)
		if _, err := parseListQuery(v); err == nil {
			t.Errorf("%s accepted", q)
		} else if status, _, _ := errorStatus(err); status != 400 {
			t.Errorf("%s: status %d, want 400", q, status)
		}
	}
}

func TestPage(t *testing.T) {
	h := &Handler{cfg: DefaultConfig()}
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var all []sandbox.Sandbox
	for i := 0; i < 5; i++ {
		all = append(all, sandbox.Sandbox{
			ID: sandbox.NewID(sandbox.PrefixSandbox), State: sandbox.StateRunning, Template: "busybox",
			CreatedAt: base.Add(time.Duration(i) * time.Minute), Metadata: map[string]string{"i": fmt.Sprint(i % 2)},
		})
	}
	all[4].State = sandbox.StateStopped
	all[3].State = sandbox.StateCreating // invisible to E2B
	all[2].Template = "pt-base"
	// A restart moves a sandbox to the front of the start-time order.
	all[0].LastStart = &sandbox.LastStart{Restore: sandbox.RestoreMemory, RAMRestored: true, At: base.Add(time.Hour)}

	ids := func(v []detailView) []string {
		var out []string
		for _, d := range v {
			out = append(out, d.SandboxID)
		}
		return out
	}
	list := func(q string) ([]string, string) {
		t.Helper()
		v, _ := url.ParseQuery(q)
		lq, err := parseListQuery(v)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		items, next := h.page(all, lq)
		return ids(items), next
	}
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"", []string{all[0].ID, all[4].ID, all[2].ID, all[1].ID}},
		{"order=asc", []string{all[1].ID, all[2].ID, all[4].ID, all[0].ID}},
		{"state=running", []string{all[0].ID, all[2].ID, all[1].ID}},
		{"state=paused", []string{all[4].ID}},
		{"template=base", []string{all[2].ID}},
		{"metadata=i%3D1", []string{all[1].ID}},
		{"startedAfter=" + url.QueryEscape(base.Add(90*time.Second).Format(time.RFC3339)), []string{all[0].ID, all[4].ID, all[2].ID}},
	} {
		got, next := list(tc.q)
		if d := cmp.Diff(tc.want, got); d != "" || next != "" {
			t.Errorf("%q (-want +got):\n%s next %q", tc.q, d, next)
		}
	}
	var got []string
	q := "limit=1"
	for range 10 {
		page, next := list(q)
		got = append(got, page...)
		if next == "" {
			break
		}
		q = "limit=1&nextToken=" + next
	}
	if d := cmp.Diff([]string{all[0].ID, all[4].ID, all[2].ID, all[1].ID}, got); d != "" {
		t.Errorf("paged (-want +got):\n%s", d)
	}
	// Paused sandboxes show what their last start restored.
	v, _ := url.ParseQuery("state=running")
	lq, _ := parseListQuery(v)
	items, _ := h.page(all, lq)
	if items[0].Restore != "memory" || items[0].RAMRestored == nil || !*items[0].RAMRestored || items[0].StartedAt != base.Add(time.Hour).Format(time.RFC3339Nano) {
		t.Errorf("restarted sandbox view: %+v", items[0])
	}
}

func TestAction(t *testing.T) {
	exp := time.Now()
	for _, tc := range []struct {
		name   string
		sb     sandbox.Sandbox
		action sandbox.ExpiryAction
		ttl    bool
	}{
		{"made through /v1", sandbox.Sandbox{}, sandbox.ExpireDelete, false},
		{"kill on timeout", sandbox.Sandbox{ExpiresAt: &exp, ExpiryAction: sandbox.ExpireDelete}, sandbox.ExpireDelete, true},
		{"pause on timeout", sandbox.Sandbox{ExpiresAt: &exp, ExpiryAction: sandbox.ExpireStop}, sandbox.ExpireStop, true},
		{"auto-paused by its TTL", sandbox.Sandbox{State: sandbox.StateStopped, Reason: "ttl_expired"}, sandbox.ExpireStop, true},
	} {
		if got := action(tc.sb); got != tc.action {
			t.Errorf("%s: action %q, want %q", tc.name, got, tc.action)
		}
		if got := hasTTL(tc.sb); got != tc.ttl {
			t.Errorf("%s: hasTTL %v, want %v", tc.name, got, tc.ttl)
		}
	}
}

func TestWriteEnvdError(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/filesystem.Filesystem/Stat", `{"code":"unavailable","message":"gone"}`},
		{"/process.Process/Start", `{"code":"unavailable","message":"gone"}`},
		{"/files", `{"code":502,"message":"gone"}`},
		{"/health", `{"code":502,"message":"gone"}`},
	} {
		rec := httptest.NewRecorder()
		writeEnvdError(rec, httptest.NewRequest("POST", tc.path, nil), http.StatusBadGateway, "unavailable", "gone")
		if rec.Code != 502 || strings.TrimSpace(rec.Body.String()) != tc.want {
			t.Errorf("%s: %d %s, want 502 %s", tc.path, rec.Code, rec.Body, tc.want)
		}
	}
}
