package httpapi

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestGetSandboxWire pins GET /v1/sandboxes/{id}'s answer byte for byte
// (ids and times masked) and its headers, so that a change to how the
// answer is built or encoded cannot change what clients read. The record
// has what encoding must get right: a name, metadata with characters
// JSON escapes (HTML, U+2028, non-ASCII), env keys in an order to sort,
// a TTL. PT_UPDATE_GOLDEN=1 rewrites testdata/get_sandbox.golden.
func TestGetSandboxWire(t *testing.T) {
	handler, id := getBenchStack(t, `{"template":"busybox","name":"pin-1","ttl_ms":3600000,
		"metadata":{"z":"last","a":"<b>&amp;\u2028 caf\u00e9 \"q\" \\ \t"},
		"env":{"B_KEY":"secret","A_KEY":"secret"}}`)
	r := httptest.NewRequest("GET", "/v1/sandboxes/"+id, nil)
	r.Header.Set("Authorization", "Bearer tok")
	w := httptest.NewRecorder()
	handler.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("GET: %d %s", w.Code, w.Body)
	}
	var keys []string
	for k := range w.Header() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if got, want := strings.Join(keys, ","), "Content-Type,X-Request-Id"; got != want {
		t.Errorf("headers %s, want %s", got, want)
	}
	if ct := w.Header().Values("Content-Type"); len(ct) != 1 || ct[0] != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	body := w.Body.String()
	body = strings.ReplaceAll(body, id, "SBX_ID")
	body = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z`).ReplaceAllString(body, "TIME")
	body = regexp.MustCompile(`"(org|prj|tplv)_[0-9A-Z]{20,}"`).ReplaceAllString(body, `"${1}_ID"`)
	const golden = "testdata/get_sandbox.golden"
	if os.Getenv("PT_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if body != string(want) {
		t.Errorf("GET answer changed:\n got %s\nwant %s", body, want)
	}
}
