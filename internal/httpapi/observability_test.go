package httpapi

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/platinum-dev/platinum/internal/requestid"
)

// scrape returns the /metrics text, read with token tok.
func scrape(t *testing.T, url, tok string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMetricsRouteTemplates: requests are counted by the router's pattern,
// never by the raw path, with their status; the scrape-time families are
// there too.
func TestMetricsRouteTemplates(t *testing.T) {
	srv, _, tok := newServer(t)
	resp, m := call(t, srv, tok, "GET", "/v1/sandboxes/sbx_doesnotexist0000000000000", "")
	if resp.StatusCode != 404 {
		t.Fatalf("get: %d %v", resp.StatusCode, m)
	}
	call(t, srv, tok, "GET", "/v1/sandboxes", "")
	call(t, srv, tok, "GET", "/v1/no/such/route/xyzzy", "")
	call(t, srv, tok, "POST", "/v1/sandboxes", `{"template":"nope"}`)

	code, text := scrape(t, srv.URL, tok)
	if code != 200 {
		t.Fatalf("scrape: %d %s", code, text)
	}
	for _, want := range []string{
		`platinum_http_requests_total{code="404",method="GET",route="GET /v1/sandboxes/{id}"}`,
		`platinum_http_requests_total{code="200",method="GET",route="GET /v1/sandboxes"}`,
		`platinum_http_requests_total{code="404",method="GET",route="unmatched"}`,
		`platinum_http_request_duration_seconds_bucket{method="GET",route="GET /v1/sandboxes/{id}",le="+Inf"}`,
		`platinum_lifecycle_operation_duration_seconds_count{op="create",outcome="refused",runtime="runc"}`,
		`platinum_sandboxes{state="running"}`,
		`platinum_host_capacity_used{resource="cpu"}`,
		`platinum_admission_queue_depth`,
		`platinum_store_query_duration_seconds_count{op="query",pool="read"}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(text, "sbx_doesnotexist") || strings.Contains(text, "xyzzy") {
		t.Error("a raw path became a label")
	}
}

// TestMetricsNeedsPlatformAdmin: on the API listener (which sandboxes
// reach too) /metrics is for platform admin tokens only.
func TestMetricsNeedsPlatformAdmin(t *testing.T) {
	srv, _, tok := newServer(t)
	if code, _ := scrape(t, srv.URL, ""); code != 401 {
		t.Errorf("no token: %d, want 401", code)
	}
	_, m := call(t, srv, tok, "POST", "/v1/orgs", `{"name":"tenant"}`)
	orgTok, _ := m["token"].(string)
	if orgTok == "" {
		t.Fatalf("create org: %v", m)
	}
	if code, body := scrape(t, srv.URL, orgTok); code != 403 || !strings.Contains(body, `"forbidden"`) {
		t.Errorf("another org's admin: %d %s, want 403 forbidden", code, body)
	}
}

// TestRequestID: a sane client id is echoed, anything else is replaced by
// a generated one; error bodies carry the id of their response.
func TestRequestID(t *testing.T) {
	srv, _, tok := newServer(t)
	generated := regexp.MustCompile(`^req_[0-9a-f]{24}$`)
	for _, tc := range []struct {
		name, sent string
		kept       bool
	}{
		{"none", "", false},
		{"sane", "trace-1234:abcd/ef", true},
		{"max length", strings.Repeat("a", requestid.MaxLen), true},
		{"too long", strings.Repeat("a", requestid.MaxLen+1), false},
		{"space", "two words", false},
		{"non-ascii", "caf\u00e9", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/v1/sandboxes/sbx_missing", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			if tc.sent != "" {
				req.Header.Set(requestid.Header, tc.sent)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got := resp.Header.Get(requestid.Header)
			if tc.kept && got != tc.sent {
				t.Errorf("id %q answered as %q, want it kept", tc.sent, got)
			}
			if !tc.kept && !generated.MatchString(got) {
				t.Errorf("id %q answered as %q, want a generated one", tc.sent, got)
			}
			b, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(b), `"request_id":"`+got+`"`) {
				t.Errorf("error body %s lacks request_id %q", b, got)
			}
		})
	}
	// Successes carry the header too, each request its own id.
	r1, _ := call(t, srv, tok, "GET", "/v1/sandboxes", "")
	r2, _ := call(t, srv, tok, "GET", "/healthz", "")
	a, b := r1.Header.Get(requestid.Header), r2.Header.Get(requestid.Header)
	if !generated.MatchString(a) || !generated.MatchString(b) || a == b {
		t.Errorf("ids %q and %q: want two distinct generated ids", a, b)
	}
}

// lockedBuffer is a bytes.Buffer safe for the logger's and the test's
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return out
}

// TestRequestIDInLogs: every request leaves one access line carrying its
// id, route template, status and duration (Info for a refusal, Debug for a
// success), and what the control plane logs while serving it carries the
// id too.
func TestRequestIDInLogs(t *testing.T) {
	var buf lockedBuffer
	log := slog.New(requestid.NewLogHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	h := &slowHost{release: make(chan struct{})}
	close(h.release)
	srv := serveLogged(t, h, nil, nil, log)
	do := func(id, method, path, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set(requestid.Header, id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := do("t-missing", "GET", "/v1/sandboxes/sbx_missing", ""); code != 404 {
		t.Fatalf("get missing: %d", code)
	}
	if code := do("t-create", "POST", "/v1/sandboxes?wait_for_state=running", `{"template":"busybox"}`); code != 201 && code != 200 {
		t.Fatalf("create: %d", code)
	}
	for _, tc := range []struct{ id, want string }{
		{"t-missing", `level=INFO msg=request component=http method=GET route="GET /v1/sandboxes/{id}" status=404`},
		{"t-create", `level=DEBUG msg=request component=http method=POST route="POST /v1/sandboxes" status=20`},
	} {
		access := buf.lines("msg=request ")
		var mine []string
		for _, l := range access {
			if strings.Contains(l, "request_id="+tc.id) {
				mine = append(mine, l)
			}
		}
		if len(mine) != 1 || !strings.Contains(mine[0], tc.want) || !strings.Contains(mine[0], "duration_ms=") {
			t.Errorf("access lines of %s = %q, want one like %q with duration_ms", tc.id, mine, tc.want)
		}
	}
	// The control plane's own lines about the create carry its id.
	if got := buf.lines(`msg="sandbox created"`); len(got) != 1 || !strings.Contains(got[0], "request_id=t-create") {
		t.Errorf("control plane lines of the create: %q", got)
	}
	if got := buf.lines(`msg="sandbox running"`); len(got) != 1 || !strings.Contains(got[0], "request_id=t-create") {
		t.Errorf("provisioning lines of the create: %q", got)
	}
}
