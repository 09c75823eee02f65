package controlplane

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/archive"
	objfs "github.com/platinum-dev/platinum/internal/objstore/fs"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// diskHost is a fakeHost whose sandboxes share one disk image to archive
// and restore each sandbox's disk to its own file, so archive and
// unarchive run for real against a local object store.
type diskHost struct {
	*fakeHost
	dir string
}

func (h *diskHost) DiskImagePath(id string) string { return filepath.Join(h.dir, id+".img") }

// newDiskService is a Service over a diskHost with a local-directory
// object store; it returns the disk image's bytes too.
func newDiskService(t *testing.T, tune func(*Config)) (*Service, *diskHost, []byte) {
	t.Helper()
	dir := t.TempDir()
	data := bytes.Repeat([]byte("platinum disk "), (5<<20)/14)
	img := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(img, data, 0o600); err != nil {
		t.Fatal(err)
	}
	h := &diskHost{fakeHost: &fakeHost{DiskImageFile: img}, dir: dir}
	objs, err := objfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newServiceWith(t, h, "", func(c *Config) {
		c.Objects = objs
		if tune != nil {
			tune(c)
		}
	})
	return s, h, data
}

// setRecord changes a stored record behind the service's back (what a
// crash or another node leaves), without waking anyone.
func setRecord(t *testing.T, s *Service, id string, mutate func(*sandbox.Sandbox)) sandbox.Sandbox {
	t.Helper()
	sb, err := s.store.GetSandbox(context.Background(), "", id)
	if err != nil {
		t.Fatal(err)
	}
	mutate(&sb)
	out, err := s.store.UpdateSandbox(context.Background(), sb)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func waitState(t *testing.T, s *Service, id string, want sandbox.State) sandbox.Sandbox {
	t.Helper()
	got, ok, err := s.WaitFor(context.Background(), org, id, want, 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("sandbox %s: state %s (reason %q), want %s: %v", id, got.State, got.Reason, want, err)
	}
	return got
}

// TestUpdateEnforcesTransitionTable: every write goes through the one
// table. For every (from, to) pair an allowed change commits with a
// version bump and exactly one state_changed event row; a refused one is a
// StateError that changes nothing and writes no event.
func TestUpdateEnforcesTransitionTable(t *testing.T) {
	s, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	for _, from := range sandbox.AllStates {
		for _, to := range sandbox.AllStates {
			now := time.Now().UTC()
			sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: org.OrgID, State: from,
				Template: "busybox", CPU: 1, RAMMB: 256, DiskGB: 1, CreatedAt: now, UpdatedAt: now}
			if err := st.CreateSandbox(ctx, sb); err != nil {
				t.Fatal(err)
			}
			cur, _ := st.GetSandbox(ctx, "", sb.ID)
			before, _ := st.SandboxEvents(ctx, sb.ID)
			next := cur
			next.State = to
			out, err := s.update(ctx, next)
			after, _ := st.SandboxEvents(ctx, sb.ID)
			stored, _ := st.GetSandbox(ctx, "", sb.ID)
			if !sandbox.CanTransition(from, to) {
				var se *StateError
				if !errors.As(err, &se) || stored.State != from || stored.Version != cur.Version || len(after) != len(before) {
					t.Errorf("%s → %s: err %v, stored %s v%d (was v%d), events %d → %d; want refused, nothing changed",
						from, to, err, stored.State, stored.Version, cur.Version, len(before), len(after))
				}
				continue
			}
			if err != nil || out.State != to || stored.State != to || stored.Version != cur.Version+1 {
				t.Errorf("%s → %s: err %v, stored %s v%d (was v%d)", from, to, err, stored.State, stored.Version, cur.Version)
				continue
			}
			wantEvents := 0
			if from != to {
				wantEvents = 1
			}
			var changes int
			for _, e := range after[len(before):] {
				if e.Type == store.EventStateChanged {
					changes++
				}
			}
			if changes != wantEvents {
				t.Errorf("%s → %s: %d state_changed events, want %d", from, to, changes, wantEvents)
			}
		}
	}
}

// TestFailedSandboxCanStartStopAndDelete: failed is never a dead end;
// start, stop and delete all work from it.
func TestFailedSandboxCanStartStopAndDelete(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	h := &fakeHost{StartFunc: func(ctx context.Context, spec StartSpec) (Instance, error) {
		if broken.Load() {
			return Instance{}, errors.New("runc exploded")
		}
		return Instance{Address: "127.0.0.1"}, nil
	}}
	s, _ := newTestService(t, h)
	ctx := context.Background()
	sb, err := s.Create(ctx, org, CreateRequest{Template: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	failed := func() {
		t.Helper()
		got := waitState(t, s, sb.ID, sandbox.StateFailed)
		if got.Reason == "" {
			t.Fatal("failed without a reason")
		}
	}
	failed()

	// start from failed
	broken.Store(false)
	if _, err := s.Start(ctx, org, sb.ID); err != nil {
		t.Fatalf("start of failed: %v", err)
	}
	if got := waitState(t, s, sb.ID, sandbox.StateRunning); got.Reason != "" {
		t.Errorf("running with a stale reason %q", got.Reason)
	}

	// stop from failed
	s.Stop(ctx, org, sb.ID)
	waitState(t, s, sb.ID, sandbox.StateStopped)
	broken.Store(true)
	s.Start(ctx, org, sb.ID)
	failed()
	if _, err := s.Stop(ctx, org, sb.ID); err != nil {
		t.Fatalf("stop of failed: %v", err)
	}
	waitState(t, s, sb.ID, sandbox.StateStopped)

	// delete from failed
	s.Start(ctx, org, sb.ID)
	failed()
	if _, err := s.Delete(ctx, org, sb.ID); err != nil {
		t.Fatalf("delete of failed: %v", err)
	}
	waitDeleted(t, s, sb.ID)
}

// TestWaitForWakesOnCommitPollsAndKeepsItsDeadline: a waiter wakes on a
// committed change without polling; a change it is not told about (another
// writer) is caught by the backstop poll; and a stream of notifications
// that never reach the target does not stretch the original deadline.
func TestWaitForWakesOnCommitPollsAndKeepsItsDeadline(t *testing.T) {
	ctx := context.Background()
	t.Run("commit wakes the waiter", func(t *testing.T) {
		s, _ := newServiceWith(t, &fakeHost{}, "", func(c *Config) { c.PollInterval = time.Hour })
		sb := running(t, s, CreateRequest{Template: "busybox"})
		go func() {
			time.Sleep(50 * time.Millisecond)
			s.Stop(ctx, org, sb.ID)
		}()
		// With no poll, only the commit can end this wait before 60 s.
		if got, ok, err := s.WaitFor(ctx, org, sb.ID, sandbox.StateStopped, time.Minute); !ok || err != nil {
			t.Fatalf("wait = %s %v %v", got.State, ok, err)
		}
	})
	t.Run("backstop poll covers an unannounced change", func(t *testing.T) {
		s, _ := newServiceWith(t, &fakeHost{}, "", func(c *Config) { c.PollInterval = 20 * time.Millisecond })
		sb := running(t, s, CreateRequest{Template: "busybox"})
		go func() {
			time.Sleep(50 * time.Millisecond)
			// Straight to the store: no notification.
			cur, _ := s.store.GetSandbox(ctx, "", sb.ID)
			cur.State = sandbox.StateStopping
			s.store.UpdateSandbox(ctx, cur)
		}()
		got, ok, err := s.WaitFor(ctx, org, sb.ID, sandbox.StateStopping, time.Minute)
		if !ok || err != nil || got.State != sandbox.StateStopping {
			t.Fatalf("wait = %s %v %v", got.State, ok, err)
		}
	})
	t.Run("notifications keep the original deadline", func(t *testing.T) {
		s, _ := newServiceWith(t, &fakeHost{}, "", func(c *Config) { c.PollInterval = time.Hour })
		sb := running(t, s, CreateRequest{Template: "busybox"})
		stop := make(chan struct{})
		churned := make(chan struct{})
		var commits atomic.Int32
		go func() {
			defer close(churned)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				cur, err := s.store.GetSandbox(ctx, "", sb.ID)
				if err == nil {
					cur.Metadata = map[string]string{"n": string(rune('a' + i%26))}
					if _, err := s.update(ctx, cur); err == nil {
						commits.Add(1)
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		done := make(chan bool, 1)
		go func() {
			_, ok, _ := s.WaitFor(ctx, org, sb.ID, sandbox.StateStopped, 200*time.Millisecond)
			done <- ok
		}()
		select {
		case ok := <-done:
			if ok {
				t.Error("a wait for stopped reached it on a running sandbox")
			}
		case <-time.After(30 * time.Second):
			t.Error("the wait never ended: each notification restarted its deadline")
		}
		close(stop)
		<-churned
		if commits.Load() < 2 {
			t.Fatalf("only %d commits woke the waiter; the test proved nothing", commits.Load())
		}
	})
}

// TestReconcileFinishesTransitionalStates: a sandbox left in starting,
// stopping, archiving or restoring (a crash between the record and the
// work) ends running, stopped, archived or running again — on start-up,
// and from the periodic pass once it is stuck past its deadline.
func TestReconcileFinishesTransitionalStates(t *testing.T) {
	s, h, data := newDiskService(t, func(c *Config) { c.TransitionDeadline = 300 * time.Millisecond })
	ctx := context.Background()
	stopped := func() sandbox.Sandbox {
		sb := running(t, s, CreateRequest{Template: "busybox"})
		s.Stop(ctx, org, sb.ID)
		return waitState(t, s, sb.ID, sandbox.StateStopped)
	}
	starting := stopped()
	setRecord(t, s, starting.ID, func(sb *sandbox.Sandbox) { sb.State = sandbox.StateStarting })
	stopping := running(t, s, CreateRequest{Template: "busybox"})
	setRecord(t, s, stopping.ID, func(sb *sandbox.Sandbox) { sb.State = sandbox.StateStopping })
	archiving := stopped()
	setRecord(t, s, archiving.ID, func(sb *sandbox.Sandbox) { sb.State = sandbox.StateArchiving })
	restoring := stopped()
	s.Archive(ctx, org, restoring.ID)
	waitState(t, s, restoring.ID, sandbox.StateArchived)
	setRecord(t, s, restoring.ID, func(sb *sandbox.Sandbox) { sb.State = sandbox.StateRestoring })

	if err := s.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, starting.ID, sandbox.StateRunning)
	waitState(t, s, stopping.ID, sandbox.StateStopped)
	if got := waitState(t, s, archiving.ID, sandbox.StateArchived); got.Archive == nil || !got.Archive.Complete {
		t.Errorf("archive finished by the reconciler: %+v", got.Archive)
	}
	waitState(t, s, restoring.ID, sandbox.StateRunning)
	if b, err := os.ReadFile(h.DiskImagePath(restoring.ID)); err != nil || !bytes.Equal(b, data) {
		t.Errorf("disk restored by the reconciler: %d bytes, %v", len(b), err)
	}

	// The periodic pass: a transitional state past its deadline is driven
	// again (the deadline here is 300 ms; the default is minutes).
	stuck := running(t, s, CreateRequest{Template: "busybox"})
	setRecord(t, s, stuck.ID, func(sb *sandbox.Sandbox) { sb.State = sandbox.StateStopping })
	time.Sleep(400 * time.Millisecond)
	checks, err := s.reconcilePass(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	s.runChecks(ctx, checks)
	waitState(t, s, stuck.ID, sandbox.StateStopped)
}

// TestAutoDeleteCountsFromStopThroughArchive: auto_delete_days runs from
// the stop, and an auto-archive on the way does not cancel it; 0 disables
// each timer.
func TestAutoDeleteCountsFromStopThroughArchive(t *testing.T) {
	s, _, _ := newDiskService(t, nil)
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox", AutoArchiveDays: ptr(2), AutoDeleteDays: ptr(5)})
	never := running(t, s, CreateRequest{Template: "busybox", AutoArchiveDays: ptr(0), AutoDeleteDays: ptr(0)})
	for _, id := range []string{sb.ID, never.ID} {
		s.Stop(ctx, org, id)
		waitState(t, s, id, sandbox.StateStopped)
	}
	ago := func(days int) *time.Time { at := time.Now().UTC().Add(-time.Duration(days) * s.cfg.Day); return &at }
	setRecord(t, s, sb.ID, func(sb *sandbox.Sandbox) { sb.StoppedAt = ago(3) })
	setRecord(t, s, never.ID, func(sb *sandbox.Sandbox) { sb.StoppedAt = ago(1000) })
	s.runTimers(ctx)
	waitState(t, s, sb.ID, sandbox.StateArchived)

	setRecord(t, s, sb.ID, func(sb *sandbox.Sandbox) { sb.StoppedAt = ago(6) })
	s.runTimers(ctx)
	if got := waitState(t, s, sb.ID, sandbox.StateDeleted); got.Reason != "auto_deleted" {
		t.Errorf("deleted_reason %q, want auto_deleted", got.Reason)
	}
	if got, _ := s.Get(ctx, org, never.ID, false); got.State != sandbox.StateStopped {
		t.Errorf("timers set to 0 still fired: %s", got.State)
	}
}

// TestTimersFireAfterRestart: retention timers live in the store; a new
// Service over the same database (a ptd restart) fires them.
func TestTimersFireAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	first, st := newServiceWith(t, &fakeHost{}, path, nil)
	sb := running(t, first, CreateRequest{Template: "busybox", AutoStopMinutes: ptr(1)})
	first.Close()
	st.Close()

	second, _ := newServiceWith(t, &fakeHost{}, path, func(c *Config) {
		c.Minute, c.TimerInterval = 10*time.Millisecond, 20*time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	second.RunTimers(ctx)
	got := waitState(t, second, sb.ID, sandbox.StateStopped)
	if got.Reason != "auto_stopped" {
		t.Errorf("reason %q, want auto_stopped", got.Reason)
	}
}

// TestStartResetsTheStopTimer: a start counts as activity, so a sandbox
// started after a long idle stop is not stopped again at the next tick,
// while one idle as long without a start is.
func TestStartResetsTheStopTimer(t *testing.T) {
	s, _ := newServiceWith(t, &fakeHost{}, "", func(c *Config) { c.Minute = 20 * time.Millisecond })
	ctx := context.Background()
	// auto-stop after 100 "minutes" = 2 s idle.
	restarted := running(t, s, CreateRequest{Template: "busybox", AutoStopMinutes: ptr(100)})
	idle := running(t, s, CreateRequest{Template: "busybox", AutoStopMinutes: ptr(100)})
	used := running(t, s, CreateRequest{Template: "busybox", AutoStopMinutes: ptr(100)})
	time.Sleep(2200 * time.Millisecond)
	// File traffic is activity (the fake host has no agent: the call
	// fails after it counted).
	s.Download(ctx, org, used.ID, "/root")
	s.Stop(ctx, org, restarted.ID)
	waitState(t, s, restarted.ID, sandbox.StateStopped)
	s.Start(ctx, org, restarted.ID)
	waitState(t, s, restarted.ID, sandbox.StateRunning)
	s.runTimers(ctx)
	waitState(t, s, idle.ID, sandbox.StateStopped)
	for what, id := range map[string]string{"a just-started": restarted.ID, "a just-used": used.ID} {
		if got, _ := s.Get(ctx, org, id, false); got.State != sandbox.StateRunning {
			t.Errorf("%s sandbox was auto-stopped: %s (%s)", what, got.State, got.Reason)
		}
	}
}

// TestRetentionTypeDefaultsAndOverrides: type sets the three timers'
// defaults (persistent when absent); each can be overridden at create, 0
// disables it; bad values are refused and create nothing.
func TestRetentionTypeDefaultsAndOverrides(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  CreateRequest
		want sandbox.Retention
	}{
		{"default is persistent", CreateRequest{}, sandbox.Retention{Type: "persistent", AutoStopMinutes: 60, AutoArchiveDays: 7}},
		{"persistent", CreateRequest{Type: "persistent"}, sandbox.Retention{Type: "persistent", AutoStopMinutes: 60, AutoArchiveDays: 7}},
		{"ephemeral", CreateRequest{Type: "ephemeral"}, sandbox.Retention{Type: "ephemeral", AutoStopMinutes: 15}},
		{"dev", CreateRequest{Type: "dev"}, sandbox.Retention{Type: "dev", AutoStopMinutes: 120, AutoArchiveDays: 30}},
		{"one override", CreateRequest{Type: "dev", AutoDeleteDays: ptr(90)}, sandbox.Retention{Type: "dev", AutoStopMinutes: 120, AutoArchiveDays: 30, AutoDeleteDays: 90}},
		{"0 disables", CreateRequest{AutoStopMinutes: ptr(0), AutoArchiveDays: ptr(0)}, sandbox.Retention{Type: "persistent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Template = "busybox"
			sb, err := s.Create(ctx, org, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if sb.Retention != tc.want {
				t.Errorf("retention = %+v, want %+v", sb.Retention, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		req   CreateRequest
		field string
	}{
		{CreateRequest{Type: "forever"}, "type"},
		{CreateRequest{AutoStopMinutes: ptr(-1)}, "auto_stop_minutes"},
		{CreateRequest{AutoArchiveDays: ptr(-1)}, "auto_archive_days"},
		{CreateRequest{AutoDeleteDays: ptr(100001)}, "auto_delete_days"},
	} {
		_, before, _ := s.List(ctx, org, ListRequest{})
		tc.req.Template = "busybox"
		_, err := s.Create(ctx, org, tc.req)
		var fe *sandbox.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: err %v, want a FieldError on %s", tc.req, err, tc.field)
		}
		if _, after, _ := s.List(ctx, org, ListRequest{}); after != before {
			t.Errorf("%+v: a refused create left a sandbox (%d → %d)", tc.req, before, after)
		}
	}
}

// TestWarmBudgetStopsTheOldestDiskOnly: frozen sandboxes share a RAM
// budget; beyond it the oldest stop is made disk-only (its next start is a
// cold boot) while the newest stays warm.
func TestWarmBudgetStopsTheOldestDiskOnly(t *testing.T) {
	h := &fakeHost{}
	s, _ := newServiceWith(t, h, "", func(c *Config) { c.WarmBudgetMB = 600 })
	ctx := context.Background()
	oldest := running(t, s, CreateRequest{Template: "busybox", RAMMB: ptr(512)})
	newest := running(t, s, CreateRequest{Template: "busybox", RAMMB: ptr(512)})
	for _, id := range []string{oldest.ID, newest.ID} {
		s.Stop(ctx, org, id)
		waitState(t, s, id, sandbox.StateStopped)
	}
	if !h.Frozen(ctx, oldest.ID) || !h.Frozen(ctx, newest.ID) {
		t.Fatal("stops did not keep memory")
	}
	s.runTimers(ctx)
	for deadline := time.Now().Add(10 * time.Second); h.Frozen(ctx, oldest.ID) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if h.Frozen(ctx, oldest.ID) || !h.Frozen(ctx, newest.ID) {
		t.Fatalf("after the budget check: oldest frozen %v (want false), newest frozen %v (want true)",
			h.Frozen(ctx, oldest.ID), h.Frozen(ctx, newest.ID))
	}
	for id, want := range map[string]string{oldest.ID: sandbox.RestoreDiskOnly, newest.ID: sandbox.RestoreMemory} {
		s.Start(ctx, org, id)
		if got := waitState(t, s, id, sandbox.StateRunning); got.LastStart == nil || got.LastStart.Restore != want {
			t.Errorf("%s: last start %+v, want %s", id, got.LastStart, want)
		}
	}
}

// TestDisposalKeepsSharedChunksAndRecordsBuckets: disposing of one
// sandbox removes its own manifest, never chunks another archive shares,
// even after chunk GC; the ledger names the recorded archive bucket and
// leaves the snapshot bucket unknown when none was recorded.
func TestDisposalKeepsSharedChunksAndRecordsBuckets(t *testing.T) {
	s, _, data := newDiskService(t, func(c *Config) {
		c.DeletedRetention, c.ChunkGCInterval = time.Hour, time.Nanosecond
	})
	ctx := context.Background()
	var ids []string
	for range 2 {
		sb := running(t, s, CreateRequest{Template: "busybox"})
		s.Stop(ctx, org, sb.ID)
		waitState(t, s, sb.ID, sandbox.StateStopped)
		s.Archive(ctx, org, sb.ID)
		waitState(t, s, sb.ID, sandbox.StateArchived)
		ids = append(ids, sb.ID)
	}
	gone, kept := ids[0], ids[1]
	s.Delete(ctx, org, gone)
	waitDeleted(t, s, gone)
	goneRec, _ := s.store.GetSandbox(ctx, "", gone)
	setRecord(t, s, gone, func(sb *sandbox.Sandbox) { at := time.Now().Add(-2 * time.Hour); sb.DeletedAt = &at })
	// Chunk GC only takes chunks older than its grace period: run it late.
	s.dispose(ctx, time.Now())
	s.dispose(ctx, time.Now())
	archive.GC(ctx, s.cfg.Objects, s.cfg.ArchiveBucket, archive.GCOptions{Grace: time.Nanosecond})

	if _, err := s.store.GetSandbox(ctx, "", gone); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record not purged: %v", err)
	}
	if _, err := s.cfg.Objects.Stat(ctx, goneRec.Archive.Bucket, goneRec.Archive.ManifestKey); err == nil {
		t.Error("the purged sandbox's manifest is still stored")
	}
	led, _ := s.store.Ledger(ctx)
	if len(led) != 1 || led[0].SandboxID != gone || led[0].OrgID != org.OrgID || led[0].DeletedReason != "user_deleted" ||
		len(led[0].Objects) != 1 || led[0].Objects[0].Bucket != s.cfg.ArchiveBucket || led[0].Objects[0].Key != goneRec.Archive.ManifestKey ||
		led[0].SnapshotBucket != "" {
		t.Errorf("ledger: %+v", led)
	}
	keptRec, _ := s.store.GetSandbox(ctx, "", kept)
	out := filepath.Join(t.TempDir(), "restored.img")
	if _, err := archive.Restore(ctx, s.cfg.Objects, keptRec.Archive.Bucket, keptRec.Archive.ManifestKey, out, archive.RestoreOptions{}); err != nil {
		t.Fatalf("the other sandbox's archive broke: %v", err)
	}
	if b, _ := os.ReadFile(out); !bytes.Equal(b, data) {
		t.Error("the other sandbox's archive restored different bytes")
	}
}

// TestEveryStateIsDeletable: nothing is undeletable; a DELETE of a
// sandbox in any state (also one a crash left mid-operation) ends deleted.
func TestEveryStateIsDeletable(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	for _, st := range sandbox.AllStates {
		if st == sandbox.StateDeleted || st == sandbox.StateDeleting {
			continue
		}
		t.Run(string(st), func(t *testing.T) {
			sb := running(t, s, CreateRequest{Template: "busybox"})
			setRecord(t, s, sb.ID, func(sb *sandbox.Sandbox) { sb.State = st })
			got, err := s.Delete(ctx, org, sb.ID)
			if err != nil || got.State != sandbox.StateDeleting {
				t.Fatalf("delete in %s: %s %v", st, got.State, err)
			}
			waitDeleted(t, s, sb.ID)
		})
	}
}

// TestEphemeralStopWaitEndsDeleted: an ephemeral sandbox is deleted when
// it stops; a wait for stopped counts that as reached (it never hangs on
// or times out over the deletion that follows the stop).
func TestEphemeralStopWaitEndsDeleted(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox", Type: sandbox.TypeEphemeral})
	if _, err := s.Stop(ctx, org, sb.ID); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.WaitFor(ctx, org, sb.ID, sandbox.StateStopped, 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("wait for stopped: %s %v %v", got.State, ok, err)
	}
	if got := waitState(t, s, sb.ID, sandbox.StateDeleted); got.Reason != "auto_deleted" {
		t.Errorf("deleted_reason %q, want auto_deleted", got.Reason)
	}
}
