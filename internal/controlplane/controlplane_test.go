package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/hostapi/hosttest"
	"github.com/platinum-dev/platinum/internal/objstore"
	objfs "github.com/platinum-dev/platinum/internal/objstore/fs"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// fakeHost is the function-field test host (hosttest.Host): each test
// sets its behaviour through the Func fields.
type fakeHost = hosttest.Host

func newTestService(t *testing.T, h *fakeHost) (*Service, store.Store) {
	t.Helper()
	return newServiceWith(t, h, "", nil)
}

// newServiceWith opens a SQLite store at path (in a fresh temp dir when
// empty) and a Service over it and h with a 20 ms poll and no agent
// init; tune, when not nil, changes the config first. Both close at the
// test's cleanup.
func newServiceWith(t testing.TB, h Host, path string, tune func(*Config)) (*Service, store.Store) {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "db")
	}
	st, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.PollInterval = 20 * time.Millisecond
	if tune != nil {
		tune(&cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := New(cfg, st, h, tenancy.New(tenancy.DefaultConfig(), st, log), log)
	t.Cleanup(func() { s.Close(); st.Close() })
	s.noAgentInit = true
	return s, st
}

// setOrgDefaults gives s a tenancy service whose default org quotas tune
// changed (an org's overrides still win).
func setOrgDefaults(s *Service, st store.Store, tune func(*tenancy.Config)) {
	c := tenancy.DefaultConfig()
	tune(&c)
	s.tenancy = tenancy.New(c, st, s.log)
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
	if len(h.Destroyed()) == 0 {
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
	if n := h.Builds(); n != 1 {
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
		{"cpu 0", CreateRequest{Template: "busybox", CPU: f(0)}, "cpu"},
		{"ram 64", CreateRequest{Template: "busybox", RAMMB: i(64)}, "ram_mb"},
		{"disk 0", CreateRequest{Template: "busybox", DiskGB: i(0)}, "disk_gb"},
		{"env key", CreateRequest{Template: "busybox", Env: map[string]string{"A-B": "x"}}, "env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Create(context.Background(), org, tc.req)
			var fe *sandbox.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, sandbox.ErrInvalidArgument) {
				t.Fatalf("err = %v, want field %s", err, tc.field)
			}
		})
	}
	// No template: the server's default (python-node), which this host
	// cannot build.
	if _, err := s.Create(context.Background(), org, CreateRequest{}); !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), "python-node") {
		t.Errorf("no template = %v, want the default template, not found here", err)
	}
	var tooBig *EnvVarTooLargeError
	if _, err := s.Create(context.Background(), org, CreateRequest{Template: "busybox", Env: map[string]string{"A": string(make([]byte, 128*1024))}}); !errors.As(err, &tooBig) {
		t.Errorf("huge env var: %v", err)
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

func running(t *testing.T, s *Service, req CreateRequest) sandbox.Sandbox {
	t.Helper()
	sb, err := s.Create(context.Background(), org, req)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.WaitFor(context.Background(), org, sb.ID, sandbox.StateRunning, 5*time.Second)
	if err != nil || !ok {
		t.Fatalf("not running: %v %v", got.State, err)
	}
	return got
}

func TestStopStartWarmAndIdempotent(t *testing.T) {
	h := &fakeHost{}
	s, _ := newTestService(t, h)
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox"})
	if _, err := s.Stop(ctx, org, sb.ID); err != nil {
		t.Fatal(err)
	}
	if again, err := s.Stop(ctx, org, sb.ID); err != nil || (again.State != sandbox.StateStopping && again.State != sandbox.StateStopped) {
		t.Fatalf("second stop = %v %v", again.State, err)
	}
	st, ok, _ := s.WaitFor(ctx, org, sb.ID, sandbox.StateStopped, 5*time.Second)
	if !ok || st.StoppedAt == nil {
		t.Fatalf("stopped = %+v", st)
	}
	if _, err := s.Start(ctx, org, sb.ID); err != nil {
		t.Fatal(err)
	}
	r, ok, _ := s.WaitFor(ctx, org, sb.ID, sandbox.StateRunning, 5*time.Second)
	if !ok || r.LastStart == nil || r.LastStart.Restore != sandbox.RestoreMemory || !r.LastStart.RAMRestored {
		t.Fatalf("warm start = %+v", r.LastStart)
	}
	if again, err := s.Start(ctx, org, sb.ID); err != nil || again.State != sandbox.StateRunning {
		t.Fatalf("start on running = %v %v", again.State, err)
	}
	// Past the warm window the sandbox is stopped disk-only; the next start says so.
	s.cfg.WarmWindow = 0
	s.Stop(ctx, org, sb.ID)
	s.WaitFor(ctx, org, sb.ID, sandbox.StateStopped, 5*time.Second)
	s.runTimers(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for h.Frozen(ctx, sb.ID) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	s.Start(ctx, org, sb.ID)
	r, ok, _ = s.WaitFor(ctx, org, sb.ID, sandbox.StateRunning, 5*time.Second)
	if !ok || r.LastStart.Restore != sandbox.RestoreDiskOnly || r.LastStart.RAMRestored {
		t.Fatalf("cold start = %+v", r.LastStart)
	}
}

func TestRefusedTransitions(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox"})
	s.Delete(ctx, org, sb.ID)
	waitDeleted(t, s, sb.ID)
	if _, err := s.Start(ctx, org, sb.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("start deleted: %v", err)
	}
	sb2 := running(t, s, CreateRequest{Template: "busybox"})
	if _, err := s.Archive(ctx, org, sb2.ID); err == nil {
		t.Error("archive of a running sandbox succeeded")
	}
}

func TestTTLAndRetentionTimers(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	s.cfg.Minute = 10 * time.Millisecond
	ttl := running(t, s, CreateRequest{Template: "busybox"})
	if _, err := s.SetExpiry(ctx, org, ttl.ID, time.Now().Add(-time.Second), sandbox.ExpireDelete); err != nil {
		t.Fatal(err)
	}
	idle := running(t, s, CreateRequest{Template: "busybox", Type: sandbox.TypeEphemeral, AutoStopMinutes: ptr(1)})
	time.Sleep(20 * time.Millisecond)
	s.runTimers(ctx)
	got, _, _ := s.WaitFor(ctx, org, ttl.ID, sandbox.StateDeleted, 5*time.Second)
	if got.State != sandbox.StateDeleted || got.Reason != "ttl_expired" {
		t.Errorf("ttl: %v %q", got.State, got.Reason)
	}
	// An idle ephemeral sandbox stops, and is deleted when it stops.
	got, _, _ = s.WaitFor(ctx, org, idle.ID, sandbox.StateDeleted, 5*time.Second)
	if got.State != sandbox.StateDeleted || got.Reason != "auto_deleted" {
		t.Errorf("ephemeral idle: %v %q", got.State, got.Reason)
	}
}

func ptr[T any](v T) *T { return &v }

func TestPatchEnvConcurrentMerges(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox", Env: map[string]string{"KEEP": "1", "DROP": "x"}})
	var wg sync.WaitGroup
	errs := make(chan error, 25)
	for i := 0; i < 24; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := "v"
			_, err := s.PatchEnv(ctx, org, sb.ID, map[string]*string{"K" + strconv.Itoa(i): &v})
			errs <- err
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := s.PatchEnv(ctx, org, sb.ID, map[string]*string{"DROP": nil})
		errs <- err
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.Get(ctx, org, sb.ID, false)
	if len(got.Env) != 25 || got.Env["KEEP"] != "1" || got.Env["DROP"] != "" {
		t.Fatalf("merged env has %d keys: %v", len(got.Env), got.Env)
	}
	// Over the total limit: refused whole, nothing changes.
	big := string(make([]byte, 100*1024))
	_, err := s.PatchEnv(ctx, org, sb.ID, map[string]*string{"B1": &big, "B2": &big, "B3": &big})
	if !errors.Is(err, ErrEnvTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	after, _ := s.Get(ctx, org, sb.ID, false)
	if len(after.Env) != 25 {
		t.Errorf("a refused patch changed env: %d keys", len(after.Env))
	}
}

func TestParentChild(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	parent := running(t, s, CreateRequest{Template: "busybox"})
	child := running(t, s, CreateRequest{Template: "busybox", ParentID: parent.ID})
	if _, err := s.Create(ctx, org, CreateRequest{Template: "busybox", ParentID: "sbx_01KZZZZZZZZZZZZZZZZZZZZZZZ"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("missing parent: %v", err)
	}
	if _, err := s.Create(ctx, Principal{OrgID: "org_b"}, CreateRequest{Template: "busybox", ParentID: parent.ID}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("parent in another org: %v", err)
	}
	var ce *ChildrenError
	if _, err := s.Delete(ctx, org, parent.ID); !errors.As(err, &ce) || len(ce.Children) != 1 || ce.Children[0] != child.ID {
		t.Fatalf("delete parent with a live child: %v", err)
	}
	s.Stop(ctx, org, parent.ID)
	s.WaitFor(ctx, org, parent.ID, sandbox.StateStopped, 5*time.Second)
	if _, err := s.Create(ctx, org, CreateRequest{Template: "busybox", ParentID: parent.ID}); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("stopped parent: %v", err)
	}
	s.Delete(ctx, org, child.ID)
	waitDeleted(t, s, child.ID)
	if _, err := s.Delete(ctx, org, parent.ID); err != nil {
		t.Errorf("delete parent after its child: %v", err)
	}
}

func TestRenameUniquePerOrg(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	a := running(t, s, CreateRequest{Template: "busybox", Name: "ci-runner"})
	b := running(t, s, CreateRequest{Template: "busybox"})
	name := "ci-runner"
	if _, err := s.Update(ctx, org, b.ID, Patch{Name: &name}); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("rename to a taken name: %v", err)
	}
	if _, err := s.Create(ctx, org, CreateRequest{Template: "busybox", Name: "ci-runner"}); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("create with a taken name: %v", err)
	}
	empty := ""
	if got, err := s.Update(ctx, org, a.ID, Patch{Name: &empty}); err != nil || got.Name != "" {
		t.Errorf("clear name: %v %q", err, got.Name)
	}
	if got, err := s.Update(ctx, org, b.ID, Patch{Name: &name}); err != nil || got.Name != name {
		t.Errorf("rename to a freed name: %v %q", err, got.Name)
	}
}

// newDisposalService is the setting of the final-disposal tests: archives
// go to the bucket "arch" of a file object store, and deleted sandboxes
// are kept an hour after a user's deletion, three after the platform's.
func newDisposalService(t *testing.T) (*Service, store.Store, *objfs.Store) {
	t.Helper()
	s, st := newTestService(t, &fakeHost{})
	objs, err := objfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.cfg.Objects = objs
	objs.EnsureBucket(context.Background(), "arch")
	s.cfg.DeletedRetention, s.cfg.PlatformRecoveryRetention = time.Hour, 3*time.Hour
	return s, st, objs
}

func TestFinalDisposal(t *testing.T) {
	s, st, objs := newDisposalService(t)
	ctx := context.Background()
	put := func(key string) {
		if err := objs.Put(ctx, "arch", key, strings.NewReader("{}"), 2); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(reason string, age time.Duration, archived bool, parent string) sandbox.Sandbox {
		sb := running(t, s, CreateRequest{Template: "busybox", ParentID: parent})
		cur, _ := st.GetSandbox(ctx, "", sb.ID)
		cur.State, cur.Reason = sandbox.StateDeleting, reason
		cur, _ = st.UpdateSandbox(ctx, cur)
		at := time.Now().Add(-age)
		cur.State, cur.DeletedAt = sandbox.StateDeleted, &at
		if archived {
			key := "manifests/" + sb.ID + ".json"
			put(key)
			cur.Archive = &sandbox.ArchiveRef{Bucket: "arch", ManifestKey: key, Complete: true}
		}
		if _, err := st.UpdateSandbox(ctx, cur); err != nil {
			t.Fatal(err)
		}
		return cur
	}
	userOld := mk("user_deleted", 2*time.Hour, true, "")
	userNew := mk("user_deleted", 30*time.Minute, false, "")
	platformArchived := mk("platform_deleted", 2*time.Hour, true, "")
	platformBare := mk("platform_deleted", 2*time.Hour, false, "")
	s.dispose(ctx, time.Now())
	s.dispose(ctx, time.Now()) // second pass carries out the queued object deletions

	gone := func(id string) bool { _, err := st.GetSandbox(ctx, "", id); return errors.Is(err, store.ErrNotFound) }
	if !gone(userOld.ID) || gone(userNew.ID) || gone(platformArchived.ID) || !gone(platformBare.ID) {
		t.Errorf("purged: userOld %v userNew %v platformArchived %v platformBare %v",
			gone(userOld.ID), gone(userNew.ID), gone(platformArchived.ID), gone(platformBare.ID))
	}
	if _, err := objs.Stat(ctx, "arch", userOld.Archive.ManifestKey); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("purged sandbox's archive manifest still stored: %v", err)
	}
	if _, err := objs.Stat(ctx, "arch", platformArchived.Archive.ManifestKey); err != nil {
		t.Errorf("recovery data of a platform-deleted sandbox was removed early: %v", err)
	}
	led, _ := st.Ledger(ctx)
	if len(led) != 2 || led[0].OrgID != org.OrgID || len(led[0].Objects) != 1 || led[0].Objects[0].Bucket != "arch" {
		t.Errorf("ledger: %+v", led)
	}
	// After 90 days (3h here) the platform-deleted one goes too.
	s.dispose(ctx, time.Now().Add(2*time.Hour))
	if !gone(platformArchived.ID) {
		t.Error("platform-deleted sandbox kept past its recovery window")
	}
}

func TestUsageFromEvents(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ev := func(min int, typ, data string) store.Event {
		return store.Event{Type: typ, Data: data, CreatedAt: t0.Add(time.Duration(min) * time.Minute)}
	}
	sb := sandbox.Sandbox{ID: "sbx_x", CPU: 4, RAMMB: 2048, DiskGB: 10, CreatedAt: t0}
	evs := []store.Event{
		ev(0, "created", `{"cpu":2,"ram_mb":1024,"disk_gb":10}`),
		ev(1, store.EventStateChanged, `{"from":"creating","to":"running"}`),
		ev(11, "resized", `{"cpu":4,"ram_mb":2048,"disk_gb":10}`),
		ev(21, store.EventStateChanged, `{"from":"running","to":"stopping"}`),
		ev(21, store.EventStateChanged, `{"from":"stopping","to":"stopped"}`),
		ev(81, store.EventStateChanged, `{"from":"stopped","to":"archiving"}`),
		ev(82, store.EventStateChanged, `{"from":"archiving","to":"archived"}`),
	}
	u := usageFrom(sb, evs, t0, t0.Add(200*time.Minute))
	// 10 min at 2 cpu + 10 min at 4 cpu; 10 min at 1 GB + 10 min at 2 GB;
	// 60 min stopped at 10 GB; archived bills nothing.
	if u.CPUSeconds != 600*2+600*4 || u.RAMGBSeconds != 600*1+600*2 || u.StorageGBHours != 10 {
		t.Errorf("usage = cpu %v ram %v storage %v", u.CPUSeconds, u.RAMGBSeconds, u.StorageGBHours)
	}
	// A window clips the periods.
	u = usageFrom(sb, evs, t0.Add(16*time.Minute), t0.Add(31*time.Minute))
	if u.CPUSeconds != 300*4 || u.StorageGBHours != 10.0*10/60 {
		t.Errorf("windowed usage = cpu %v storage %v", u.CPUSeconds, u.StorageGBHours)
	}
}

func TestDiskAutogrow(t *testing.T) {
	used := uint64(95)
	h := &fakeHost{MetricsFunc: func(string) (Metrics, error) {
		return Metrics{DiskUsedBytes: used, DiskSizeBytes: 100}, nil
	}}
	s, _ := newTestService(t, h)
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox", DiskGB: ptr(4)})
	s.runTimers(ctx)
	if got, _ := s.Get(ctx, org, sb.ID, false); got.DiskGB != 4 {
		t.Fatalf("autogrow ran while disabled: %d", got.DiskGB)
	}
	s.cfg.DiskAutogrowMaxGB = 20
	s.runTimers(ctx)
	if got, _ := s.Get(ctx, org, sb.ID, false); got.DiskGB != 14 {
		t.Fatalf("first grow: %d GB, want 4+10", got.DiskGB)
	}
	s.runTimers(ctx)
	if got, _ := s.Get(ctx, org, sb.ID, false); got.DiskGB != 20 {
		t.Fatalf("capped grow: %d GB, want 20", got.DiskGB)
	}
	used = 10
	s.runTimers(ctx)
	if got, _ := s.Get(ctx, org, sb.ID, false); got.DiskGB != 20 {
		t.Fatalf("grew below 90%%: %d", got.DiskGB)
	}
}

func TestProgressShownOnReads(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	sb := running(t, s, CreateRequest{Template: "busybox"})
	s.setProgress(sb.ID, &sandbox.Progress{Op: "archive", DoneBytes: 5, TotalBytes: 10})
	got, _ := s.Get(context.Background(), org, sb.ID, false)
	if got.Progress == nil || got.Progress.DoneBytes != 5 {
		t.Fatalf("progress = %+v", got.Progress)
	}
	s.setProgress(sb.ID, nil)
	if got, _ := s.Get(context.Background(), org, sb.ID, false); got.Progress != nil {
		t.Errorf("cleared progress still shown: %+v", got.Progress)
	}
}

func TestTreeQuota(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	s.cfg.TreeMaxSandboxes, s.cfg.TreeMaxCPU = 3, 4
	root := running(t, s, CreateRequest{Template: "busybox"})
	child := running(t, s, CreateRequest{Template: "busybox", ParentID: root.ID})
	// A grandchild counts against the root's tree too.
	var qe *sandbox.QuotaError
	if _, err := s.Create(ctx, org, CreateRequest{Template: "busybox", ParentID: child.ID, CPU: ptr(3.0)}); !errors.As(err, &qe) || qe.Limit != "cpu" {
		t.Fatalf("cpu over the tree limit: %v", err)
	}
	running(t, s, CreateRequest{Template: "busybox", ParentID: child.ID})
	if _, err := s.Create(ctx, org, CreateRequest{Template: "busybox", ParentID: root.ID}); !errors.As(err, &qe) || qe.Limit != "sandboxes" {
		t.Fatalf("count over the tree limit: %v", err)
	}
	// Top-level sandboxes are not in the tree.
	running(t, s, CreateRequest{Template: "busybox"})
}

func TestDiskGrowUnsupported(t *testing.T) {
	h := &fakeHost{GrowErr: errors.New("xfs_growfs: not supported")}
	s, _ := newTestService(t, h)
	sb := running(t, s, CreateRequest{Template: "busybox", DiskGB: ptr(2)})
	var dg *DiskGrowError
	if _, err := s.Resize(context.Background(), org, sb.ID, ResizeRequest{DiskGB: ptr(4)}); !errors.As(err, &dg) {
		t.Fatalf("err = %v", err)
	}
	if got, _ := s.Get(context.Background(), org, sb.ID, false); got.DiskGB != 2 {
		t.Errorf("a failed grow changed the size to %d", got.DiskGB)
	}
}

func TestPatchEnvOnDeletedIsNotFound(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox"})
	if _, err := s.Delete(ctx, org, sb.ID); err != nil {
		t.Fatal(err)
	}
	v := "x"
	if _, err := s.PatchEnv(ctx, org, sb.ID, map[string]*string{"A": &v}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("patch while deleting: %v", err)
	}
	waitDeleted(t, s, sb.ID)
	if _, err := s.PatchEnv(ctx, org, sb.ID, map[string]*string{"A": &v}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("patch after delete: %v", err)
	}
}

// failingStore is an object store that is down while down is set.
type failingStore struct {
	objstore.Store
	down atomic.Bool
}

func (f *failingStore) Put(ctx context.Context, bucket, key string, r io.Reader, size int64) error {
	if f.down.Load() {
		return fmt.Errorf("connection refused: %w", objstore.ErrUnavailable)
	}
	return f.Store.Put(ctx, bucket, key, r, size)
}

func TestArchiveFailsHalfwayThenRetries(t *testing.T) {
	img := filepath.Join(t.TempDir(), "disk.img")
	data := make([]byte, 9<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	os.WriteFile(img, data, 0o600)
	h := &fakeHost{DiskImageFile: img}
	s, _ := newTestService(t, h)
	ctx := context.Background()
	fs, _ := objfs.Open(t.TempDir())
	objs := &failingStore{Store: fs}
	s.cfg.Objects = objs
	sb := running(t, s, CreateRequest{Template: "busybox"})
	s.Stop(ctx, org, sb.ID)
	s.WaitFor(ctx, org, sb.ID, sandbox.StateStopped, 5*time.Second)

	objs.down.Store(true)
	if _, err := s.Archive(ctx, org, sb.ID); err != nil {
		t.Fatal(err)
	}
	got, _, _ := s.WaitFor(ctx, org, sb.ID, sandbox.StateArchived, 2*time.Second)
	if got.State != sandbox.StateStopped || !strings.Contains(got.Reason, "archive failed") || got.Archive != nil {
		t.Fatalf("after a failed archive: %v %q", got.State, got.Reason)
	}
	if b, _ := os.ReadFile(img); len(b) != len(data) || h.RemovedDisk() {
		t.Fatal("a failed archive touched the local disk")
	}
	objs.down.Store(false)
	s.Archive(ctx, org, sb.ID)
	got, ok, _ := s.WaitFor(ctx, org, sb.ID, sandbox.StateArchived, 5*time.Second)
	// The local disk is freed right after the archived state is committed.
	for deadline := time.Now().Add(5 * time.Second); !h.RemovedDisk() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if !ok || got.Archive == nil || !got.Archive.Complete || !h.RemovedDisk() {
		t.Fatalf("retry: %v %+v removed=%v", got.State, got.Archive, h.RemovedDisk())
	}
}
