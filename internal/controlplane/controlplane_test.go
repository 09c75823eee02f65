package controlplane

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
)

// fakeHost is a Host whose behaviour each test sets through its Func fields.
type fakeHost struct {
	StartFunc   func(ctx context.Context, spec StartSpec) (Instance, error)
	BuildFunc   func(ctx context.Context, slug, versionID string, progress func(string)) (string, int64, error)
	DestroyFunc func(ctx context.Context, id string) error

	mu        sync.Mutex
	destroyed []string
	builds    atomic.Int32
}

var _ Host = (*fakeHost)(nil)

func (f *fakeHost) ID() string          { return "host_test" }
func (f *fakeHost) Templates() []string { return []string{"busybox", "pt-base"} }
func (f *fakeHost) BuildTemplate(ctx context.Context, slug, versionID string, progress func(string)) (string, int64, error) {
	f.builds.Add(1)
	if f.BuildFunc != nil {
		return f.BuildFunc(ctx, slug, versionID, progress)
	}
	return "/templates/" + versionID, 1, nil
}
func (f *fakeHost) Start(ctx context.Context, spec StartSpec) (Instance, error) {
	if f.StartFunc != nil {
		return f.StartFunc(ctx, spec)
	}
	return Instance{Address: "127.0.0.1"}, nil
}
func (f *fakeHost) Running(ctx context.Context, id string) bool { return true }
func (f *fakeHost) Destroy(ctx context.Context, id string) error {
	f.mu.Lock()
	f.destroyed = append(f.destroyed, id)
	f.mu.Unlock()
	if f.DestroyFunc != nil {
		return f.DestroyFunc(ctx, id)
	}
	return nil
}

func newTestService(t *testing.T, h *fakeHost) (*Service, store.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.PollInterval = 20 * time.Millisecond
	s := New(cfg, st, h, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { s.Close(); st.Close() })
	s.noAgentInit = true
	return s, st
}

var org = Principal{OrgID: "org_a", Role: store.RoleAdmin}

func TestCreateReachesRunning(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	sb, err := s.Create(context.Background(), org, CreateRequest{Template: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.State != sandbox.StateCreating || sb.CPU != 1 || sb.RAMMB != 512 || sb.DiskGB != 2 {
		t.Errorf("created = %+v", sb)
	}
	got, ok, err := s.WaitFor(context.Background(), org, sb.ID, sandbox.StateRunning, 5*time.Second)
	if err != nil || !ok || got.Address != "127.0.0.1" || got.TemplateVersionID == "" {
		t.Fatalf("wait = %+v %v %v", got, ok, err)
	}
}

func TestWaitTimesOutWhileProvisioning(t *testing.T) {
	release := make(chan struct{})
	s, _ := newTestService(t, &fakeHost{StartFunc: func(ctx context.Context, spec StartSpec) (Instance, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return Instance{Address: "127.0.0.1"}, nil
	}})
	sb, err := s.Create(context.Background(), org, CreateRequest{Template: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.WaitFor(context.Background(), org, sb.ID, sandbox.StateRunning, 100*time.Millisecond)
	if err != nil || ok || got.State != sandbox.StateCreating {
		t.Fatalf("short wait = %v %v %v, want creating and not reached", got.State, ok, err)
	}
	close(release)
	if _, ok, _ := s.WaitFor(context.Background(), org, sb.ID, sandbox.StateRunning, 5*time.Second); !ok {
		t.Fatal("never reached running after release")
	}
}

func TestStartFailureEndsFailedWithReason(t *testing.T) {
	h := &fakeHost{StartFunc: func(ctx context.Context, spec StartSpec) (Instance, error) {
		return Instance{}, errors.New("runc exploded")
	}}
	s, _ := newTestService(t, h)
	sb, _ := s.Create(context.Background(), org, CreateRequest{Template: "busybox"})
	got, ok, _ := s.WaitFor(context.Background(), org, sb.ID, sandbox.StateRunning, 5*time.Second)
	if ok || got.State != sandbox.StateFailed || got.Reason == "" {
		t.Fatalf("got %v %q", got.State, got.Reason)
	}
	// A failed sandbox is still deletable, and its partial host state was cleaned.
	if _, err := s.Delete(context.Background(), org, sb.ID); err != nil {
		t.Fatal(err)
	}
	waitDeleted(t, s, sb.ID)
}

func waitDeleted(t *testing.T, s *Service, id string) {
	t.Helper()
	got, _, err := s.WaitFor(context.Background(), org, id, sandbox.StateDeleted, 5*time.Second)
	if err != nil || got.State != sandbox.StateDeleted || got.DeletedAt == nil {
		t.Fatalf("delete: %+v %v", got, err)
	}
}

func TestDeleteDuringCreateTearsDownAfterProvisioning(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	h := &fakeHost{StartFunc: func(ctx context.Context, spec StartSpec) (Instance, error) {
		close(started)
		<-release
		return Instance{Address: "127.0.0.1"}, nil
	}}
	s, _ := newTestService(t, h)
	sb, _ := s.Create(context.Background(), org, CreateRequest{Template: "busybox"})
	<-started
	del, err := s.Delete(context.Background(), org, sb.ID)
	if err != nil || del.State != sandbox.StateDeleting {
		t.Fatalf("delete = %v %v", del.State, err)
	}
	close(release)
	waitDeleted(t, s, sb.ID)
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.destroyed) == 0 {
		t.Error("host resources were never destroyed")
	}
}

func TestTemplateBuiltOncePerSlugConcurrently(t *testing.T) {
	h := &fakeHost{BuildFunc: func(ctx context.Context, slug, v string, progress func(string)) (string, int64, error) {
		progress("working")
		time.Sleep(100 * time.Millisecond)
		return "/t/" + v, 1, nil
	}}
	s, _ := newTestService(t, h)
	var ids []string
	for i := 0; i < 5; i++ {
		sb, err := s.Create(context.Background(), org, CreateRequest{Template: "pt-base"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	for _, id := range ids {
		if _, ok, _ := s.WaitFor(context.Background(), org, id, sandbox.StateRunning, 5*time.Second); !ok {
			t.Fatal("not running")
		}
	}
	if n := h.builds.Load(); n != 1 {
		t.Errorf("template built %d times, want 1", n)
	}
}

func TestReconcileProvisionsInterruptedCreates(t *testing.T) {
	h := &fakeHost{}
	s, st := newTestService(t, h)
	now := time.Now().UTC()
	sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: org.OrgID, State: sandbox.StateCreating,
		Template: "busybox", CPU: 1, RAMMB: 256, DiskGB: 1, CreatedAt: now, UpdatedAt: now}
	if err := st.CreateSandbox(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	gone := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: org.OrgID, State: sandbox.StateDeleting,
		Template: "busybox", CPU: 1, RAMMB: 256, DiskGB: 1, CreatedAt: now, UpdatedAt: now}
	if err := st.CreateSandbox(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	if err := s.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.WaitFor(context.Background(), org, sb.ID, sandbox.StateRunning, 5*time.Second); !ok {
		t.Error("interrupted create never reached running")
	}
	waitDeleted(t, s, gone.ID)
}

func TestValidation(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	f := func(v float64) *float64 { return &v }
	i := func(v int) *int { return &v }
	for _, tc := range []struct {
		name  string
		req   CreateRequest
		field string
	}{
		{"no template", CreateRequest{}, "template"},
		{"cpu 0", CreateRequest{Template: "busybox", CPU: f(0)}, "cpu"},
		{"ram 64", CreateRequest{Template: "busybox", RAMMB: i(64)}, "ram_mb"},
		{"disk 0", CreateRequest{Template: "busybox", DiskGB: i(0)}, "disk_gb"},
		{"env key", CreateRequest{Template: "busybox", Env: map[string]string{"A-B": "x"}}, "env"},
		{"env huge", CreateRequest{Template: "busybox", Env: map[string]string{"A": string(make([]byte, 128*1024))}}, "env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Create(context.Background(), org, tc.req)
			var fe *sandbox.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, sandbox.ErrInvalidArgument) {
				t.Fatalf("err = %v, want field %s", err, tc.field)
			}
		})
	}
	_, err := s.Create(context.Background(), org, CreateRequest{Template: "nope"})
	if !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("unknown template: %v", err)
	}
	rows, total, err := s.List(context.Background(), org, ListRequest{})
	if err != nil || len(rows) != 0 || total != 0 {
		t.Errorf("bad creates left rows: %v %d %v", rows, total, err)
	}
}

func TestCrossOrgNotFound(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	sb, _ := s.Create(context.Background(), org, CreateRequest{Template: "busybox"})
	other := Principal{OrgID: "org_b", Role: store.RoleAdmin}
	if _, err := s.Get(context.Background(), other, sb.ID, false); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("get: %v", err)
	}
	if _, err := s.Delete(context.Background(), other, sb.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("delete: %v", err)
	}
}
