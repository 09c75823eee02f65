package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/secrets"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
)

// Fuzz targets for every JSON body and query the REST API decodes. Each
// sends its input through the whole handler chain (request id, metrics,
// idempotency, router, decoder, control plane, SQLite) and holds two
// properties:
//   - no input is a server error: bad input is a 4xx with a stable code
//     (or the call succeeds);
//   - a refused request changes nothing: the store reads the same before
//     and after every 4xx.
//
// Seeds are in testdata/fuzz/<target>; scripts/test.sh runs each target
// for a few seconds.

// fuzzServer is one API over SQLite and an instant host, with one running
// sandbox (fuzzServer.id) for the routes that name one.
type fuzzServer struct {
	api *API
	st  *sqlite.Store
	id  string
}

func newFuzzServer(f *testing.F) *fuzzServer {
	f.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(f.TempDir(), "db"), nil)
	if err != nil {
		f.Fatal(err)
	}
	h := &slowHost{release: make(chan struct{})}
	close(h.release) // starts and stops finish at once
	log := slog.New(slog.DiscardHandler)
	cfg := controlplane.DefaultConfig()
	key, err := secrets.LoadOrCreateKey(filepath.Join(f.TempDir(), "secrets.key"))
	if err != nil {
		f.Fatal(err)
	}
	if cfg.Sealer, err = secrets.New(key); err != nil {
		f.Fatal(err)
	}
	cp := controlplane.New(cfg, st, h, log)
	cp.SkipAgentInit()
	if _, err := cp.Bootstrap(ctx, "tok"); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		cp.Close()
		st.Close()
	})
	s := &fuzzServer{api: New(cp, log), st: st}
	code, body := s.do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=10000", `{"template":"busybox","metadata":{"k":"v"},"env":{"A":"1"}}`)
	if code != 201 {
		f.Fatalf("seed sandbox: %d %s", code, body)
	}
	var sb struct{ ID string }
	json.Unmarshal(body, &sb)
	s.id = sb.ID
	return s
}

func (s *fuzzServer) do(method, target, body string) (int, []byte) {
	req := httptest.NewRequest(method, "http://ptd"+target, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	rec := httptest.NewRecorder()
	s.api.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// snapshot is what a refused request must leave as it was: every sandbox
// record (deleted ones too), the event log, webhooks and snapshots.
func (s *fuzzServer) snapshot(t *testing.T) any {
	t.Helper()
	ctx := context.Background()
	rows, _, err := s.st.ListSandboxes(ctx, store.ListOptions{IncludeDeleted: true})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.st.Events(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := s.st.ListWebhooks(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := s.st.ListSnapshots(ctx, store.SnapshotFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return storeSnapshot{rows, evs, hooks, snaps}
}

// settle waits until work an accepted call started in the background (a
// create provisioning) has stopped changing the store.
// A sandbox settles once no sandbox is in a transitional state and two
// reads 20 ms apart agree.
func (s *fuzzServer) settle(t *testing.T) {
	t.Helper()
	prev := s.snapshot(t)
	for range 500 {
		time.Sleep(20 * time.Millisecond)
		cur := s.snapshot(t)
		if cmp.Equal(prev, cur) && !busy(cur) {
			return
		}
		prev = cur
	}
	t.Fatal("the store never settled after an accepted call")
}

// busy reports whether a snapshot has a sandbox on its way somewhere.
func busy(snap any) bool {
	for _, sb := range snap.(storeSnapshot).Sandboxes {
		switch sb.State {
		case sandbox.StateCreating, sandbox.StateStarting, sandbox.StateStopping,
			sandbox.StateArchiving, sandbox.StateRestoring, sandbox.StateDeleting:
			return true
		}
	}
	return false
}

type storeSnapshot struct {
	Sandboxes []sandbox.Sandbox
	Events    []store.Event
	Webhooks  []store.Webhook
	Snapshots []sandbox.Snapshot
}

// check sends one fuzzed call, holds the two properties and returns the
// answer.
func (s *fuzzServer) check(t *testing.T, method, target, body string) (int, []byte) {
	t.Helper()
	before := s.snapshot(t)
	code, answer := s.do(method, target, body)
	if code >= 500 {
		t.Fatalf("%s %s %q: %d %s (bad input must be a 4xx)", method, target, body, code, answer)
	}
	if code >= 400 {
		var e struct {
			Code      string `json:"code"`
			Error     string `json:"error"`
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal(answer, &e); err != nil || e.Code == "" || e.Error == "" || e.RequestID == "" {
			t.Fatalf("%s %s %q: %d %s: want an Error body with code, error and request_id", method, target, body, code, answer)
		}
		if d := cmp.Diff(before, s.snapshot(t)); d != "" {
			t.Fatalf("%s %s %q: %d %s changed the store (-before +after):\n%s", method, target, body, code, answer, d)
		}
	} else {
		s.settle(t)
	}
	return code, answer
}

// fuzzBody fuzzes one route's JSON body.
func fuzzBody(f *testing.F, method, path string) {
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		s.check(t, method, strings.ReplaceAll(path, "{id}", s.id), string(body))
	})
}

func FuzzCreateSandboxBody(f *testing.F) { fuzzBody(f, "POST", "/v1/sandboxes") }
func FuzzPatchSandboxBody(f *testing.F)  { fuzzBody(f, "PATCH", "/v1/sandboxes/{id}") }
func FuzzPatchEnvBody(f *testing.F)      { fuzzBody(f, "PATCH", "/v1/sandboxes/{id}/env") }
func FuzzPatchNetworkBody(f *testing.F)  { fuzzBody(f, "PATCH", "/v1/sandboxes/{id}/network") }
func FuzzResizeBody(f *testing.F)        { fuzzBody(f, "POST", "/v1/sandboxes/{id}/resize") }
func FuzzCreateWebhookBody(f *testing.F) { fuzzBody(f, "POST", "/v1/webhooks") }

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
