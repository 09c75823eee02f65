package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// brokenHost is a controlplane.Host whose sandboxes never become ready:
// Start fails with startErr, or hangs until cancelled when it is nil. The
// embedded interface is nil: a create and a delete call only the methods
// defined here, and any other call fails the test loudly (a panic).
type brokenHost struct {
	controlplane.Host
	startErr error
}

func (brokenHost) ID() string          { return "host_e2btest" }
func (brokenHost) Templates() []string { return []string{"busybox"} }
func (brokenHost) Classes() []string   { return []string{"runc"} }
func (brokenHost) BuildTemplate(ctx context.Context, slug, versionID string, progress func(string)) (string, int64, error) {
	return "/nonexistent/rootfs", 1, nil
}
func (h brokenHost) Start(ctx context.Context, spec controlplane.StartSpec) (controlplane.Instance, error) {
	if h.startErr != nil {
		return controlplane.Instance{}, h.startErr
	}
	<-ctx.Done()
	return controlplane.Instance{}, ctx.Err()
}
func (brokenHost) Running(ctx context.Context, id string) bool { return false }
func (brokenHost) Stop(ctx context.Context, id string, keepMemory bool) (bool, error) {
	return false, nil
}
func (brokenHost) Frozen(ctx context.Context, id string) bool   { return false }
func (brokenHost) Destroy(ctx context.Context, id string) error { return nil }

// newBrokenService is a control plane on h over a fresh store, with the
// tenancy service that authenticates its callers. Both close when tb ends,
// the control plane first (which cancels a hanging Start).
func newBrokenService(tb testing.TB, h brokenHost) (*controlplane.Service, *tenancy.Service) {
	tb.Helper()
	log := slog.New(slog.DiscardHandler)
	st, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "pt.db"), log)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	tn := tenancy.New(tenancy.DefaultConfig(), st, log)
	cp := controlplane.New(controlplane.DefaultConfig(), st, h, tn, log)
	tb.Cleanup(cp.Close)
	return cp, tn
}

// TestCreateNotReady checks docs/compatibility.md's promise: an E2B create whose
// sandbox does not become ready answers 503 sandbox_not_ready (retryable)
// or 500 sandbox_create_failed, and deletes the sandbox it made.
func TestCreateNotReady(t *testing.T) {
	for _, tc := range []struct {
		name      string
		host      brokenHost
		status    int
		errorCode string
	}{
		{"wait runs out", brokenHost{}, http.StatusServiceUnavailable, "sandbox_not_ready"},
		{"start fails", brokenHost{startErr: errors.New("no runtime")}, http.StatusInternalServerError, "sandbox_create_failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cp, tn := newBrokenService(t, tc.host)
			if _, err := tn.Bootstrap(ctx, "pt_e2btest"); err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig()
			cfg.CreateWait = 300 * time.Millisecond
			srv := httptest.NewServer(New(cp, tn, cfg, slog.New(slog.DiscardHandler)))
			t.Cleanup(srv.Close)

			req, _ := http.NewRequest("POST", srv.URL+"/v2/sandboxes", strings.NewReader(`{"templateID":"busybox"}`))
			req.Header.Set("X-API-Key", "pt_e2btest")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body errorBody
			json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != tc.status || body.Code != tc.status || body.ErrorCode != tc.errorCode {
				t.Fatalf("create: %d %+v, want %d %s", resp.StatusCode, body, tc.status, tc.errorCode)
			}
			if tc.status == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
			p, err := tn.Authenticate(ctx, "pt_e2btest")
			if err != nil {
				t.Fatal(err)
			}
			id := regexp.MustCompile(`sbx_[0-9A-Z]{26}`).FindString(body.Message)
			if id == "" {
				t.Fatalf("answer names no sandbox: %q", body.Message)
			}
			sb, err := cp.Get(ctx, p, id, true)
			if err != nil {
				t.Fatal(err)
			}
			if sb.State != sandbox.StateDeleting && sb.State != sandbox.StateDeleted {
				t.Errorf("sandbox after a failed create is %s, want deleting or deleted", sb.State)
			}
		})
	}
}
func (brokenHost) Info() controlplane.HostInfo { return controlplane.HostInfo{ID: "host_test"} }
