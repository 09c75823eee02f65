package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// newIdemServer is newServer with a short in-progress wait, so a retry
// that outwaits a blocked request answers within the test.
func newIdemServer(t *testing.T, wait time.Duration) (*httptest.Server, *slowHost) {
	t.Helper()
	srv, h, _ := newServerWith(t, func(cfg *controlplane.Config) {
		cfg.Idempotency.Wait = wait
		cfg.PollInterval = 20 * time.Millisecond
	})
	return srv, h
}

// idemResp is one answer, as a retry must see it again.
type idemResp struct {
	Status   int
	Body     string
	Replayed string
}

func idemCall(t *testing.T, srv *httptest.Server, tok, method, path, key, body string) idemResp {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return idemResp{Status: resp.StatusCode, Body: string(b), Replayed: resp.Header.Get("Idempotent-Replayed")}
}

func code(r idemResp) string {
	var m map[string]any
	json.Unmarshal([]byte(r.Body), &m)
	s, _ := m["code"].(string)
	return s
}

func countSandboxes(t *testing.T, srv *httptest.Server) int {
	t.Helper()
	r := idemCall(t, srv, "tok", "GET", "/v1/sandboxes?paginated=true", "", "")
	var m struct {
		Total int `json:"total"`
	}
	if err := json.Unmarshal([]byte(r.Body), &m); err != nil {
		t.Fatalf("list: %v %s", err, r.Body)
	}
	return m.Total
}

func TestIdempotencyReplaysAndRefuses(t *testing.T) {
	tests := []struct {
		name string
		// first and retry are (key, body) of two POST /v1/sandboxes.
		firstKey, firstBody string
		retryKey, retryBody string
		wantRetryStatus     int
		wantRetryCode       string
		wantReplay          bool
		wantSandboxes       int
	}{
		{name: "same key same body replays", firstKey: "k1", firstBody: `{"template":"busybox"}`, retryKey: "k1", retryBody: `{"template":"busybox"}`,
			wantRetryStatus: 201, wantReplay: true, wantSandboxes: 1},
		{name: "same body in another key order and spacing replays", firstKey: "k1", firstBody: `{"template":"busybox","metadata":{"a":"1","b":"2"}}`,
			retryKey: "k1", retryBody: "{ \"metadata\": {\"b\":\"2\", \"a\":\"1\"},\n \"template\": \"busybox\" }", wantRetryStatus: 201, wantReplay: true, wantSandboxes: 1},
		{name: "same key other body is 409", firstKey: "k1", firstBody: `{"template":"busybox"}`, retryKey: "k1", retryBody: `{"template":"busybox","cpu":2}`,
			wantRetryStatus: 409, wantRetryCode: "idempotency_key_reused", wantSandboxes: 1},
		{name: "body field works like the header and is stripped", firstKey: "", firstBody: `{"template":"busybox","idempotency_key":"k2"}`,
			retryKey: "k2", retryBody: `{"template":"busybox"}`, wantRetryStatus: 201, wantReplay: true, wantSandboxes: 1},
		{name: "the camelCase idempotencyKey body field", firstBody: `{"template":"busybox","idempotencyKey":"k5"}`,
			retryKey: "k5", retryBody: `{"template":"busybox"}`, wantRetryStatus: 201, wantReplay: true, wantSandboxes: 1},
		{name: "other keys make other sandboxes", firstKey: "k1", firstBody: `{"template":"busybox"}`, retryKey: "k3", retryBody: `{"template":"busybox"}`,
			wantRetryStatus: 201, wantSandboxes: 2},
		{name: "no key: no replay", firstBody: `{"template":"busybox"}`, retryBody: `{"template":"busybox"}`, wantRetryStatus: 201, wantSandboxes: 2},
		{name: "a 4xx is not kept: the retry runs again", firstKey: "k4", firstBody: `{"template":"nope"}`, retryKey: "k4", retryBody: `{"template":"nope"}`,
			wantRetryStatus: 404, wantRetryCode: "not_found"},
		{name: "after a 4xx the key takes the request fixed", firstKey: "k6", firstBody: `{"template":"busybox","cpu":-1}`,
			retryKey: "k6", retryBody: `{"template":"busybox"}`, wantRetryStatus: 201, wantSandboxes: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newIdemServer(t, 5*time.Second)
			first := idemCall(t, srv, "tok", "POST", "/v1/sandboxes", tc.firstKey, tc.firstBody)
			if first.Replayed != "" {
				t.Errorf("first answer says replayed: %+v", first)
			}
			retry := idemCall(t, srv, "tok", "POST", "/v1/sandboxes", tc.retryKey, tc.retryBody)
			if retry.Status != tc.wantRetryStatus || code(retry) != tc.wantRetryCode {
				t.Fatalf("retry = %d %s, want %d %q", retry.Status, retry.Body, tc.wantRetryStatus, tc.wantRetryCode)
			}
			if tc.wantReplay {
				if diff := cmp.Diff(idemResp{Status: first.Status, Body: first.Body, Replayed: "true"}, retry); diff != "" {
					t.Errorf("replay differs from the first answer (-want +got):\n%s", diff)
				}
			} else if retry.Replayed != "" {
				t.Errorf("retry says replayed: %+v", retry)
			}
			if n := countSandboxes(t, srv); n != tc.wantSandboxes {
				t.Errorf("%d sandboxes, want %d", n, tc.wantSandboxes)
			}
		})
	}
}

func TestIdempotencyBadKeys(t *testing.T) {
	srv, _ := newIdemServer(t, time.Second)
	tests := []struct {
		name, key, body string
	}{
		{"too long", strings.Repeat("k", 256), `{"template":"busybox"}`},
		{"not printable", "", `{"template":"busybox","idempotency_key":"k\u0001"}`},
		{"body key not a string", "", `{"template":"busybox","idempotency_key":5}`},
		{"header and body differ", "a", `{"template":"busybox","idempotency_key":"b"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := idemCall(t, srv, "tok", "POST", "/v1/sandboxes", tc.key, tc.body)
			if r.Status != 400 || code(r) != "invalid_request" {
				t.Errorf("= %d %s, want 400 invalid_request", r.Status, r.Body)
			}
		})
	}
	if n := countSandboxes(t, srv); n != 0 {
		t.Errorf("refused requests made %d sandboxes", n)
	}
}

// TestIdempotencyConcurrentRetries: ten requests with one key at once make
// one sandbox, and all ten get the same answer.
func TestIdempotencyConcurrentRetries(t *testing.T) {
	srv, _ := newIdemServer(t, 30*time.Second)
	const n = 10
	var wg sync.WaitGroup
	got := make([]idemResp, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = idemCall(t, srv, "tok", "POST", "/v1/sandboxes", "burst", `{"template":"busybox","name":"burst"}`)
		}()
	}
	wg.Wait()
	firsts := 0
	for i, r := range got {
		if r.Replayed == "" {
			firsts++
		}
		if r.Status != 201 || r.Body != got[0].Body {
			t.Errorf("answer %d = %d %s, want 201 %s", i, r.Status, r.Body, got[0].Body)
		}
	}
	if firsts != 1 {
		t.Errorf("%d answers were not replays, want exactly 1", firsts)
	}
	if c := countSandboxes(t, srv); c != 1 {
		t.Errorf("%d sandboxes, want 1", c)
	}
}

// TestIdempotencyInProgress: a retry while the first request still runs
// waits; past the wait it is 409 idempotency_key_in_progress, and once the
// first finishes a retry replays its answer.
func TestIdempotencyInProgress(t *testing.T) {
	srv, h := newIdemServer(t, 200*time.Millisecond)
	path := "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=60000"
	body := `{"template":"busybox"}`
	firstc := make(chan idemResp, 1)
	go func() { firstc <- idemCall(t, srv, "tok", "POST", path, "slow", body) }()
	// Until the first request claims the key, a retry may claim it itself;
	// wait for the sandbox to exist so the order is known.
	for countSandboxes(t, srv) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	r := idemCall(t, srv, "tok", "POST", path, "slow", body)
	if r.Status != 409 || code(r) != "idempotency_key_in_progress" {
		t.Fatalf("retry while running = %d %s, want 409 idempotency_key_in_progress", r.Status, r.Body)
	}
	close(h.release)
	first := <-firstc
	if first.Status != 201 {
		t.Fatalf("first = %d %s", first.Status, first.Body)
	}
	r = idemCall(t, srv, "tok", "POST", path, "slow", body)
	if diff := cmp.Diff(idemResp{Status: 201, Body: first.Body, Replayed: "true"}, r); diff != "" {
		t.Errorf("retry after the first finished (-want +got):\n%s", diff)
	}
}

// TestIdempotencyNotKept: answers that may change on a retry (429 quota,
// 409 conflicts) are not kept: the retry runs again.
func TestIdempotencyNotKept(t *testing.T) {
	srv, _ := newIdemServer(t, time.Second)
	// A quota of one sandbox for the default org.
	r := idemCall(t, srv, "tok", "PUT", "/v1/orgs/"+tenancy.DefaultOrgID+"/quotas", "", `{"max_sandboxes":1}`)
	if r.Status != 200 {
		t.Fatalf("set quota: %d %s", r.Status, r.Body)
	}
	first := idemCall(t, srv, "tok", "POST", "/v1/sandboxes", "a", `{"template":"busybox"}`)
	if first.Status != 201 {
		t.Fatalf("first create: %d %s", first.Status, first.Body)
	}
	over := idemCall(t, srv, "tok", "POST", "/v1/sandboxes", "b", `{"template":"busybox"}`)
	if over.Status != 429 || code(over) != "quota_exceeded" {
		t.Fatalf("over quota: %d %s", over.Status, over.Body)
	}
	idemCall(t, srv, "tok", "PUT", "/v1/orgs/"+tenancy.DefaultOrgID+"/quotas", "", `{"max_sandboxes":2}`)
	again := idemCall(t, srv, "tok", "POST", "/v1/sandboxes", "b", `{"template":"busybox"}`)
	if again.Status != 201 || again.Replayed != "" {
		t.Errorf("retry after the quota was raised = %d %q %s, want a fresh 201", again.Status, again.Replayed, again.Body)
	}
}

// TestIdempotencyOnOtherMutations: keys work on every mutating route
// (here an env patch), scoped per token.
func TestIdempotencyOnOtherMutations(t *testing.T) {
	srv, h := newIdemServer(t, time.Second)
	close(h.release)
	c := idemCall(t, srv, "tok", "POST", "/v1/sandboxes?wait_for_state=running", "", `{"template":"busybox"}`)
	var sb struct{ ID string }
	json.Unmarshal([]byte(c.Body), &sb)
	path := "/v1/sandboxes/" + sb.ID + "/env"
	first := idemCall(t, srv, "tok", "PATCH", path, "env-1", `{"env":{"A":"1"}}`)
	if first.Status != 200 {
		t.Fatalf("patch: %d %s", first.Status, first.Body)
	}
	// Another change in between; the retry must not undo it.
	idemCall(t, srv, "tok", "PATCH", path, "", `{"env":{"A":null,"B":"2"}}`)
	retry := idemCall(t, srv, "tok", "PATCH", path, "env-1", `{"env":{"A":"1"}}`)
	if diff := cmp.Diff(idemResp{Status: 200, Body: first.Body, Replayed: "true"}, retry); diff != "" {
		t.Errorf("env patch retry (-want +got):\n%s", diff)
	}
	got := idemCall(t, srv, "tok", "GET", "/v1/sandboxes/"+sb.ID, "", "")
	if !strings.Contains(got.Body, `"env_keys":["B"]`) {
		t.Errorf("the replayed patch ran again: %s", got.Body)
	}
	// A delete with a key: retried, it answers the same 202.
	d1 := idemCall(t, srv, "tok", "DELETE", "/v1/sandboxes/"+sb.ID, "del-1", "")
	d2 := idemCall(t, srv, "tok", "DELETE", "/v1/sandboxes/"+sb.ID, "del-1", "")
	if d1.Status != 202 || d2.Status != 202 || d2.Body != d1.Body || d2.Replayed != "true" {
		t.Errorf("delete retry = %+v, first %+v", d2, d1)
	}
}

// TestIdempotencyLeavesRawBodiesAlone: only JSON request bodies lose an
// idempotency_key field; a file upload's bytes (even a JSON file with
// such a field) and an octet-stream body pass untouched.
func TestIdempotencyLeavesRawBodiesAlone(t *testing.T) {
	doc := `{"idempotency_key":"not-mine","x":1}`
	tests := []struct {
		name, method, path, contentType string
		wantKey                         string // what the router sees as the body's field
	}{
		{"upload", "PUT", "/v1/sandboxes/sbx_1/files", "application/x-www-form-urlencoded", "not-mine"},
		{"octet-stream", "POST", "/v1/anything", "application/octet-stream", "not-mine"},
		{"json", "POST", "/v1/anything", "application/json", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(doc))
			r.Header.Set("Content-Type", tc.contentType)
			key := ""
			b, err := readKeyedBody(r, &key)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(b.reader())
			var m map[string]any
			json.Unmarshal(got, &m)
			field, _ := m["idempotency_key"].(string)
			if field != tc.wantKey || (tc.wantKey != "" && string(got) != doc) {
				t.Errorf("body = %s (key taken: %q)", got, key)
			}
		})
	}
}

// TestIdempotencyClientGoesAway: a client that gives up on a create (its
// wait outlasted the client's timeout) and retries with the same key gets
// the first sandbox, never a second one.
func TestIdempotencyClientGoesAway(t *testing.T) {
	srv, h := newIdemServer(t, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/sandboxes?wait_for_state=running&wait_timeout_ms=60000", strings.NewReader(`{"template":"busybox"}`))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Idempotency-Key", "gone")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the first request answered %d before the host started", resp.StatusCode)
	}
	close(h.release)
	r := idemCall(t, srv, "tok", "POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=60000", "gone", `{"template":"busybox"}`)
	if r.Status != 201 || r.Replayed != "true" {
		t.Errorf("retry = %d %q %s, want the first request's 201 replayed", r.Status, r.Replayed, r.Body)
	}
	if n := countSandboxes(t, srv); n != 1 {
		t.Errorf("%d sandboxes, want 1", n)
	}
}

// TestIdempotencyCutBody: a large keyed body (an upload) whose sender goes
// away part way is refused, not spooled cut short: its answer would be
// kept for the key and replayed to the retry that sends it whole.
func TestIdempotencyCutBody(t *testing.T) {
	// The sender goes away 2 MiB in.
	cut := io.MultiReader(strings.NewReader(strings.Repeat("y", 2<<20)), iotest.ErrReader(io.ErrUnexpectedEOF))
	r := httptest.NewRequest("PUT", "/v1/sandboxes/sbx_1/files", cut)
	r.Header.Set("Content-Type", "application/octet-stream")
	key := "upload-1"
	b, err := readKeyedBody(r, &key)
	if err == nil {
		n, _ := io.Copy(io.Discard, b.reader())
		b.cleanup()
		t.Fatalf("a body cut after %d bytes was taken whole", n)
	}
	if !strings.Contains(err.Error(), "reading the request body") {
		t.Errorf("err = %v, want the body's read error", err)
	}
}
