package controlplane

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// cleanHost is a fake host that records releases and reports holdings.
type cleanHost struct {
	*fakeHost
	mu       sync.Mutex
	released []string
	holdings []hostapi.Holding
	stopErr  error
	running  func(id string) bool
}

func (h *cleanHost) Release(ctx context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released = append(h.released, id)
	return nil
}

func (h *cleanHost) Holdings(ctx context.Context) ([]hostapi.Holding, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.holdings), nil
}

func (h *cleanHost) Stop(ctx context.Context, id string, keep bool) (bool, error) {
	if h.stopErr != nil {
		return false, h.stopErr
	}
	return h.fakeHost.Stop(ctx, id, keep)
}

func (h *cleanHost) Running(ctx context.Context, id string) bool {
	if h.running != nil {
		return h.running(id)
	}
	return true
}

// wasReleased reports whether id was released, waiting a little: a
// failure is recorded before its cleanup runs.
func (h *cleanHost) wasReleased(id string) bool {
	for i := 0; ; i++ {
		h.mu.Lock()
		ok := slices.Contains(h.released, id)
		h.mu.Unlock()
		if ok || i == 100 {
			return ok
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *cleanHost) wasDestroyed(id string) bool {
	return slices.Contains(h.fakeHost.Destroyed(), id)
}

// TestFailedHoldsNothing: every path into failed frees what the sandbox
// held on its host — a failed create everything (Destroy), a failed start,
// stop or restart after host loss everything but its disk (Release).
func TestFailedHoldsNothing(t *testing.T) {
	ctx := context.Background()
	startFails := func(msg string) func(context.Context, StartSpec) (Instance, error) {
		return func(context.Context, StartSpec) (Instance, error) { return Instance{}, errors.New(msg) }
	}
	tests := []struct {
		name string
		// fail drives a sandbox of s into failed on h by the case's path
		// and returns its ID.
		fail func(t *testing.T, s *Service, h *cleanHost) string
		// destroyed: the host must have destroyed the sandbox, not only
		// released it; complaint is the failure when it did not.
		destroyed bool
		complaint string
	}{
		{"create", func(t *testing.T, s *Service, h *cleanHost) string {
			h.fakeHost.StartFunc = startFails("runtime: run: context deadline exceeded")
			sb, err := s.Create(ctx, org, CreateRequest{Template: "busybox"})
			if err != nil {
				t.Fatal(err)
			}
			return sb.ID
		}, true, "a failed create was not destroyed on its host"},
		{"start", func(t *testing.T, s *Service, h *cleanHost) string {
			sb := running(t, s, CreateRequest{Template: "busybox"})
			s.Stop(ctx, org, sb.ID)
			waitState(t, s, sb.ID, sandbox.StateStopped)
			h.fakeHost.StartFunc = startFails("agent did not come up")
			if _, err := s.Start(ctx, org, sb.ID); err != nil {
				t.Fatal(err)
			}
			return sb.ID
		}, false, "a failed start was not released on its host"},
		{"stop", func(t *testing.T, s *Service, h *cleanHost) string {
			sb := running(t, s, CreateRequest{Template: "busybox"})
			h.stopErr = errors.New("runsc checkpoint: exit status 1")
			s.Stop(ctx, org, sb.ID)
			return sb.ID
		}, false, "a failed stop was not released on its host"},
		{"restart after host loss", func(t *testing.T, s *Service, h *cleanHost) string {
			sb := running(t, s, CreateRequest{Template: "busybox"})
			h.running = func(string) bool { return false }
			h.fakeHost.StartFunc = startFails("rebuild: delete: context deadline exceeded")
			s.ensureRunning(ctx, sb.ID, reasonNotRunning)
			return sb.ID
		}, false, "a failed restart was not released on its host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &cleanHost{fakeHost: &fakeHost{}}
			s, _ := newServiceWith(t, h, "", nil)
			id := tc.fail(t, s, h)
			waitState(t, s, id, sandbox.StateFailed)
			freed := h.wasReleased
			if tc.destroyed {
				freed = h.wasDestroyed
			}
			if !freed(id) {
				t.Error(tc.complaint)
			}
		})
	}
}

// TestSweep: the sweep removes everything of sandboxes the host holds
// with no record or a deleted one, frees all but the disk of failed ones
// that still hold something, and leaves every other sandbox alone —
// including a deleted or failed one that changed within the grace period,
// whose own cleanup may still run.
func TestSweep(t *testing.T) {
	h := &cleanHost{fakeHost: &fakeHost{}}
	s, _ := newServiceWith(t, h, "", func(c *Config) { c.SweepGrace = time.Hour })
	ctx := context.Background()
	live := running(t, s, CreateRequest{Template: "busybox"})
	deleted := running(t, s, CreateRequest{Template: "busybox"})
	setRecord(t, s, deleted.ID, func(sb *sandbox.Sandbox) { sb.State = sandbox.StateDeleting })
	setRecord(t, s, deleted.ID, func(sb *sandbox.Sandbox) { sb.State = sandbox.StateDeleted })
	failed := running(t, s, CreateRequest{Template: "busybox"})
	setRecord(t, s, failed.ID, func(sb *sandbox.Sandbox) { sb.State = sandbox.StateFailed })
	failedDiskOnly := running(t, s, CreateRequest{Template: "busybox"})
	setRecord(t, s, failedDiskOnly.ID, func(sb *sandbox.Sandbox) { sb.State = sandbox.StateFailed })
	orphan := sandbox.NewID(sandbox.PrefixSandbox)
	// Recovered on another host while this one was lost: a stale copy.
	moved := running(t, s, CreateRequest{Template: "busybox"})
	setRecord(t, s, moved.ID, func(sb *sandbox.Sandbox) { sb.HostID = "host_other" })
	// A template build's box has no record while it runs: never swept.
	buildBox := sandbox.NewID(sandbox.PrefixSandbox)
	defer s.builds.holdBox(buildBox)()
	h.holdings = []hostapi.Holding{
		{ID: buildBox, Container: true, Mounts: true, Network: true, Cgroup: true, Disk: true},
		{ID: live.ID, Container: true, Mounts: true, Network: true, Cgroup: true, Disk: true},
		{ID: deleted.ID, Container: true, Disk: true},
		{ID: failed.ID, Container: true, Network: true, Disk: true},
		{ID: failedDiskOnly.ID, Disk: true},
		{ID: orphan, Container: true, Mounts: true, Cgroup: true},
		{ID: moved.ID, Container: true, Mounts: true, Network: true, Cgroup: true, Disk: true},
		{ID: "snap_01ARZ3NDEKTSV4RRFFQ69G5FAV", Disk: true},
	}
	// Within the grace period only what no record owns at all goes, and
	// what another host now runs.
	res, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Destroyed, []string{orphan, moved.ID}) || len(res.Released) != 0 {
		t.Errorf("sweep within the grace period: destroyed %v released %v; want the orphan %s and the moved %s", res.Destroyed, res.Released, orphan, moved.ID)
	}
	h.holdings = slices.DeleteFunc(h.holdings, func(hd hostapi.Holding) bool { return hd.ID == orphan || hd.ID == moved.ID })
	s.cfg.SweepGrace = 0
	if res, err = s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Destroyed, []string{deleted.ID}) || !slices.Equal(res.Released, []string{failed.ID}) {
		t.Errorf("sweep: destroyed %v released %v; want destroyed [%s] released [%s]", res.Destroyed, res.Released, deleted.ID, failed.ID)
	}
	for _, id := range []string{live.ID, failedDiskOnly.ID, buildBox} {
		if h.wasDestroyed(id) || slices.Contains(h.released, id) {
			t.Errorf("%s was swept", id)
		}
	}
}
