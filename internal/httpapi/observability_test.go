package httpapi

import (
	"io"
	"net/http"
	"regexp"
	"strings"
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
