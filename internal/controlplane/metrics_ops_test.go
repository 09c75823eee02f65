package controlplane

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/metrics/metricstest"
	objfs "github.com/platinum-dev/platinum/internal/objstore/fs"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// opCount reads how many op calls the lifecycle histogram holds for the
// runtime class and outcome.
func opCount(t *testing.T, op, runtime, outcome string) float64 {
	t.Helper()
	return metricstest.Value(t, `platinum_lifecycle_operation_duration_seconds_count{op="`+op+`",outcome="`+outcome+`",runtime="`+runtime+`"}`)
}

// recorded waits (briefly: asynchronous operations are recorded as their
// sandbox leaves the transitional state, a moment after a wait sees it)
// until op's count is want, and fails t otherwise.
func recorded(t *testing.T, op, runtime, outcome string, want float64) {
	t.Helper()
	var got float64
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if got = opCount(t, op, runtime, outcome); got == want || time.Now().After(end) {
			break
		}
	}
	if got != want {
		t.Errorf("%s %s %s = %v, want %v", op, runtime, outcome, got, want)
	}
}

// TestOperationMetrics: snapshot, fork, restore and archive are each
// recorded once per call, under the sandbox's runtime class, as ok when
// they did what was asked, refused when the caller asked for something the
// sandbox cannot do, and error when the platform failed (the object store
// refusing an archive).
func TestOperationMetrics(t *testing.T) {
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, []byte("a disk"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &snapHost{fakeHost: &fakeHost{DiskImageFile: img}}
	s := newSnapService(t, h, "")
	fs, err := objfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	objs := &failingStore{Store: fs}
	s.cfg.Objects = objs
	ctx := context.Background()
	yes := true

	for _, class := range []string{"runc", "gvisor"} {
		sb := runningSandbox(t, s, class)
		base := map[string]float64{}
		for _, k := range []string{"snapshot ok", "snapshot refused", "fork ok", "fork refused", "restore ok", "restore refused",
			"archive ok", "archive refused", "archive error"} {
			op, outcome, _ := strings.Cut(k, " ")
			base[k] = opCount(t, op, class, outcome)
		}
		snap, err := s.Snapshot(ctx, org, sb.ID, SnapshotRequest{Name: "m"})
		if err != nil {
			t.Fatal(err)
		}
		recorded(t, "snapshot", class, "ok", base["snapshot ok"]+1)
		if class == "runc" { // runc keeps no memory here
			if _, err := s.Snapshot(ctx, org, sb.ID, SnapshotRequest{Memory: &yes}); err == nil {
				t.Fatal("a memory snapshot of runc was taken")
			}
			recorded(t, "snapshot", class, "refused", base["snapshot refused"]+1)
		}

		if _, err := s.Fork(ctx, org, sb.ID, ForkRequest{Count: 1}); err != nil {
			t.Fatal(err)
		}
		recorded(t, "fork", class, "ok", base["fork ok"]+1)
		if _, err := s.Fork(ctx, org, sb.ID, ForkRequest{Count: MaxForks + 1}); err == nil {
			t.Fatal("a fork past the limit was made")
		}
		recorded(t, "fork", class, "refused", base["fork refused"]+1)

		if _, err := s.Restore(ctx, org, sb.ID, snap.ID); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.WaitFor(ctx, org, sb.ID, sandbox.StateRunning, 5*time.Second); !ok {
			t.Fatal("not running after the restore")
		}
		recorded(t, "restore", class, "ok", base["restore ok"]+1)
		if _, err := s.Restore(ctx, org, sb.ID, "snap_nope"); err == nil {
			t.Fatal("a restore of no snapshot was accepted")
		}
		recorded(t, "restore", class, "refused", base["restore refused"]+1)

		if _, err := s.Archive(ctx, org, sb.ID); err == nil {
			t.Fatal("a running sandbox was archived")
		}
		recorded(t, "archive", class, "refused", base["archive refused"]+1)
		s.Stop(ctx, org, sb.ID)
		if _, ok, _ := s.WaitFor(ctx, org, sb.ID, sandbox.StateStopped, 5*time.Second); !ok {
			t.Fatal("not stopped")
		}
		objs.down.Store(true)
		if _, err := s.Archive(ctx, org, sb.ID); err != nil {
			t.Fatal(err)
		}
		recorded(t, "archive", class, "error", base["archive error"]+1)
		objs.down.Store(false)
		if _, err := s.Archive(ctx, org, sb.ID); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.WaitFor(ctx, org, sb.ID, sandbox.StateArchived, 5*time.Second); !ok {
			t.Fatal("not archived")
		}
		recorded(t, "archive", class, "ok", base["archive ok"]+1)
	}
}

// TestAdmissionWaitMetrics: every acquire of a start slot is timed once
// under its outcome: admitted, queue_full, timeout or canceled.
func TestAdmissionWaitMetrics(t *testing.T) {
	ctx := context.Background()
	waits := func(outcome string) float64 {
		return metricstest.Value(t, `platinum_admission_wait_seconds_count{outcome="`+outcome+`"}`)
	}
	before := map[string]float64{}
	for _, o := range []string{"admitted", "queue_full", "timeout", "canceled"} {
		before[o] = waits(o)
	}
	a := newAdmission(AdmissionConfig{Queue: true, Slots: 1, Wait: 50 * time.Millisecond, MaxQueue: 1})
	rel, err := a.acquire(ctx, "o") // admitted at once
	if err != nil {
		t.Fatal(err)
	}
	w := acquireAsync(t, a, "o") // queued, then admitted
	if _, err := a.acquire(ctx, "o"); err == nil {
		t.Fatal("a start past a full queue got a slot")
	}
	rel()
	admitted(t, w)()
	rel, _ = a.acquire(ctx, "o")
	if _, err := a.acquire(ctx, "o"); err == nil { // waits 50 ms
		t.Fatal("a start got a slot held by another")
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if _, err := a.acquire(cctx, "o"); err == nil {
		t.Fatal("a cancelled start got a slot")
	}
	rel()
	for o, n := range map[string]float64{"admitted": 3, "queue_full": 1, "timeout": 1, "canceled": 1} {
		if got := waits(o); got != before[o]+n {
			t.Errorf("admission waits %s = %v, want %v", o, got, before[o]+n)
		}
	}
}
