package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/fuzzkit"
)

// Fuzz targets for every JSON body and query the REST API decodes. Each
// sends its input through the whole handler chain (request id, metrics,
// idempotency, router, decoder, control plane, SQLite, an object store on
// disk) and holds two properties:
//   - no input is a server error: bad input is a 4xx with a stable code
//     (or the call succeeds);
//   - a refused request changes nothing: every table of the store reads
//     the same before and after every 4xx, and the host was asked to do
//     nothing.
//
// Seeds are in testdata/fuzz/<target>; scripts/test.sh runs each target
// for a count of inputs (docs/testing.md). A body may name the fixtures
// the server made (fuzzServer.expand): {id}, {snap}, {org}.

// fuzzServer is the API over a fuzzkit.Env, with one running sandbox
// (id), a ready snapshot of it (snap) and a second org (org) for the routes
// that name them.
type fuzzServer struct {
	*fuzzkit.Env
	api  *API
	id   string
	snap string
	org  string
}

func newFuzzServer(f *testing.F) *fuzzServer {
	f.Helper()
	env := fuzzkit.New(f)
	s := &fuzzServer{Env: env, api: New(Deps{Sandboxes: env.CP, Tenancy: env.Tenancy, Events: env.Events, Artifacts: env.Artifacts, Sessions: env.Sessions}, slog.New(slog.DiscardHandler))}
	code, body := s.do("POST", "/v1/orgs", `{"name":"fuzz"}`)
	var org struct{ Org struct{ ID string } }
	if json.Unmarshal(body, &org); code != 201 || org.Org.ID == "" {
		f.Fatalf("org: %d %s", code, body)
	}
	s.org = org.Org.ID
	if err := s.fresh(); err != nil {
		f.Fatal(err)
	}
	return s
}

// fresh makes a new running sandbox and a ready snapshot of it the
// fixtures.
func (s *fuzzServer) fresh() error {
	code, body := s.do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=10000", `{"template":"busybox","metadata":{"k":"v"},"env":{"A":"1"}}`)
	var sb struct{ ID string }
	if json.Unmarshal(body, &sb); code != 201 {
		return fmt.Errorf("fixture sandbox: %d %s", code, body)
	}
	code, body = s.do("POST", "/v1/sandboxes/"+sb.ID+"/snapshots", `{"name":"fixture"}`)
	var snap struct{ ID, State string }
	if json.Unmarshal(body, &snap); code != 201 {
		return fmt.Errorf("fixture snapshot: %d %s", code, body)
	}
	for i := 0; snap.State != "ready"; i++ {
		if i == 500 {
			return fmt.Errorf("fixture snapshot never got ready: %s", body)
		}
		time.Sleep(10 * time.Millisecond)
		_, body = s.do("GET", "/v1/snapshots/"+snap.ID, "")
		json.Unmarshal(body, &snap)
	}
	s.id, s.snap = sb.ID, snap.ID
	return nil
}

// ready makes sure the fixture sandbox still runs (an accepted kill, TTL,
// restore or archive ends it) before the next input.
func (s *fuzzServer) ready(t *testing.T) {
	t.Helper()
	if !s.Running(t, s.id) {
		if err := s.fresh(); err != nil {
			t.Fatal(err)
		}
		s.Settle(t)
	}
}

// expand fills in a target or body's fixture names.
func (s *fuzzServer) expand(v string) string {
	return strings.NewReplacer("{id}", s.id, "{snap}", s.snap, "{org}", s.org).Replace(v)
}

func (s *fuzzServer) do(method, target, body string) (int, []byte) {
	req := httptest.NewRequest(method, "http://ptd"+target, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+fuzzkit.Token)
	rec := httptest.NewRecorder()
	s.api.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// check sends one fuzzed call, holds the two properties and returns the
// answer.
func (s *fuzzServer) check(t *testing.T, method, target, body string) (int, []byte) {
	t.Helper()
	s.ready(t)
	target, body = s.expand(target), s.expand(body)
	return s.Check(t, fmt.Sprintf("%s %s %q", method, target, body), func() (int, []byte) { return s.do(method, target, body) },
		func(_ int, answer []byte) string {
			var e struct {
				Code      string `json:"code"`
				Error     string `json:"error"`
				RequestID string `json:"request_id"`
			}
			if err := json.Unmarshal(answer, &e); err != nil || e.Code == "" || e.Error == "" || e.RequestID == "" {
				return "want an Error body with code, error and request_id"
			}
			return ""
		})
}

// fuzzBody fuzzes one route's JSON body.
func fuzzBody(f *testing.F, method, path string) {
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		s.check(t, method, path, string(body))
	})
}

func FuzzCreateSandboxBody(f *testing.F) { fuzzBody(f, "POST", "/v1/sandboxes") }
func FuzzPatchSandboxBody(f *testing.F)  { fuzzBody(f, "PATCH", "/v1/sandboxes/{id}") }
func FuzzPatchEnvBody(f *testing.F)      { fuzzBody(f, "PATCH", "/v1/sandboxes/{id}/env") }
func FuzzPatchNetworkBody(f *testing.F)  { fuzzBody(f, "PATCH", "/v1/sandboxes/{id}/network") }
func FuzzResizeBody(f *testing.F)        { fuzzBody(f, "POST", "/v1/sandboxes/{id}/resize") }
func FuzzCreateWebhookBody(f *testing.F) { fuzzBody(f, "POST", "/v1/webhooks") }

// The bodies of the sandbox's actions.
func FuzzExecBody(f *testing.F)         { fuzzBody(f, "POST", "/v1/sandboxes/{id}/exec") }
func FuzzStartProcessBody(f *testing.F) { fuzzBody(f, "POST", "/v1/sandboxes/{id}/processes") }
func FuzzProcessInputBody(f *testing.F) {
	fuzzBody(f, "POST", "/v1/sandboxes/{id}/processes/"+strconv.Itoa(fuzzkit.LivePID)+"/input")
}
func FuzzProcessSignalBody(f *testing.F) {
	fuzzBody(f, "POST", "/v1/sandboxes/{id}/processes/"+strconv.Itoa(fuzzkit.LivePID)+"/signal")
}
func FuzzProcessResizeBody(f *testing.F) {
	fuzzBody(f, "POST", "/v1/sandboxes/{id}/processes/"+strconv.Itoa(fuzzkit.LivePID)+"/resize")
}
func FuzzRunCodeBody(f *testing.F)       { fuzzBody(f, "POST", "/v1/sandboxes/{id}/code?stream=false") }
func FuzzCodeContextBody(f *testing.F)   { fuzzBody(f, "POST", "/v1/sandboxes/{id}/code/contexts") }
func FuzzMkdirBody(f *testing.F)         { fuzzBody(f, "POST", "/v1/sandboxes/{id}/files/mkdir") }
func FuzzSnapshotBody(f *testing.F)      { fuzzBody(f, "POST", "/v1/sandboxes/{id}/snapshots") }
func FuzzRestoreBody(f *testing.F)       { fuzzBody(f, "POST", "/v1/sandboxes/{id}/restore") }
func FuzzForkBody(f *testing.F)          { fuzzBody(f, "POST", "/v1/sandboxes/{id}/fork") }
func FuzzBackupBody(f *testing.F)        { fuzzBody(f, "POST", "/v1/sandboxes/{id}/backups") }
func FuzzTTLBody(f *testing.F)           { fuzzBody(f, "POST", "/v1/sandboxes/{id}/ttl") }
func FuzzKillBody(f *testing.F)          { fuzzBody(f, "POST", "/v1/sandboxes/{id}/kill") }
func FuzzPreviewURLBody(f *testing.F)    { fuzzBody(f, "POST", "/v1/sandboxes/{id}/preview-urls/8080") }
func FuzzArtifactBody(f *testing.F)      { fuzzBody(f, "POST", "/v1/sandboxes/{id}/artifacts") }
func FuzzTemplateBuildBody(f *testing.F) { fuzzBody(f, "POST", "/v1/templates/busybox/builds") }

// The bodies of the org's settings.
func FuzzCreateOrgBody(f *testing.F)     { fuzzBody(f, "POST", "/v1/orgs") }
func FuzzOrgQuotaBody(f *testing.F)      { fuzzBody(f, "PUT", "/v1/orgs/{org}/quotas") }
func FuzzCreateProjectBody(f *testing.F) { fuzzBody(f, "POST", "/v1/projects") }
func FuzzCreateTokenBody(f *testing.F)   { fuzzBody(f, "POST", "/v1/tokens") }
func FuzzCreateSessionBody(f *testing.F) { fuzzBody(f, "POST", "/v1/sessions") }
func FuzzSetPoolBody(f *testing.F)       { fuzzBody(f, "PUT", "/v1/pools/busybox") }

// FuzzCreateSecrets fuzzes the secrets map of a create (each a string or
// {value, hosts, body}), wrapped in an otherwise valid body.
func FuzzCreateSecrets(f *testing.F) {
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, secrets []byte) {
		s.check(t, "POST", "/v1/sandboxes", `{"template":"busybox","secrets":`+string(secrets)+`}`)
	})
}

// FuzzListQuery fuzzes the list's filters and paging (a raw query
// string).
func FuzzListQuery(f *testing.F) {
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, raw string) {
		if _, err := url.Parse("http://ptd/v1/sandboxes?" + raw); err != nil || strings.ContainsAny(raw, " #") {
			t.Skip() // not a URL a client can send (testdata has one)
		}
		code, body := s.check(t, "GET", "/v1/sandboxes?"+raw, "")
		if code == 200 {
			var page struct {
				Rows  []json.RawMessage `json:"rows"`
				Total *int              `json:"total"`
			}
			q, _ := url.ParseQuery(raw)
			limit, _ := strconv.Atoi(q.Get("limit"))
			if err := json.Unmarshal(body, &page); err != nil || page.Rows == nil ||
				(page.Total != nil && len(page.Rows) > *page.Total) || (limit > 0 && len(page.Rows) > limit) {
				t.Fatalf("list %q: %s: want rows, no more than limit, and a total (when paginated) at least their count", raw, body)
			}
		}
	})
}

// FuzzFilePath fuzzes the files routes' path query parameter up to the
// agent: an empty path is the one the API refuses itself.
func FuzzFilePath(f *testing.F) {
	f.Fuzz(func(t *testing.T, p string) {
		r := httptest.NewRequest("GET", "http://ptd/v1/sandboxes/sbx_x/files?path="+url.QueryEscape(p), nil)
		got, err := filePath(r)
		switch {
		case p == "" && err == nil:
			t.Fatal("an empty path was accepted")
		case p != "" && (err != nil || got != p):
			t.Fatalf("path %q came through as %q, %v", p, got, err)
		}
		if err != nil {
			status, body := (&API{}).errorBody(err)
			if status != http.StatusBadRequest || body["code"] != "invalid_request" || body["field"] != "path" {
				t.Fatalf("refusal: %d %v", status, body)
			}
		}
	})
}

// FuzzDecodeJSON fuzzes the one strict decoder every body goes through:
// it never panics, and what it refuses is a 400 or 413 with a stable code.
func FuzzDecodeJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		var v createBody
		r := httptest.NewRequest("POST", "http://ptd/", io.NopCloser(bytes.NewReader(body)))
		err := decodeJSON(r, &v, false)
		if err == nil {
			return
		}
		status, out := (&API{}).errorBody(err)
		if (status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge) || out["code"] == "internal" {
			t.Fatalf("decode %q: %d %v", body, status, out)
		}
	})
}
