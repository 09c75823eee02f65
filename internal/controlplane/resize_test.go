package controlplane

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// TestStoppedResizeBootsWithNewHeadroom: a stopped resize cold-boots the
// sandbox with new headroom (docs/resize.md). A running sandbox cannot go
// past its boot's headroom; stopped, the resize is recorded
// (next_start), the start boots at it, and the new boot's headroom and
// memory floor follow the new size.
func TestStoppedResizeBootsWithNewHeadroom(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	ctx := context.Background()
	s.cfg.PlanMaxCPU, s.cfg.PlanMaxRAMMB = 4, 4096
	sb := running(t, s, CreateRequest{Template: "busybox", CPU: ptr(1.0), RAMMB: ptr(512)})
	if sb.Live == nil || sb.Live.MaxCPU != 4 || sb.Live.MaxRAMMB != 4096 || sb.Live.BootRAMMB != 512 {
		t.Fatalf("boot headroom: %+v", sb.Live)
	}
	var nr *NotResizableError
	if _, err := s.Resize(ctx, org, sb.ID, ResizeRequest{CPU: ptr(6.0)}); !errors.As(err, &nr) {
		t.Fatalf("live resize past the headroom: %v", err)
	}
	if _, err := s.Stop(ctx, org, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.WaitFor(ctx, org, sb.ID, sandbox.StateStopped, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	res, err := s.Resize(ctx, org, sb.ID, ResizeRequest{CPU: ptr(6.0), RAMMB: ptr(6144), DiskGB: ptr(4)})
	if err != nil || res.AppliesAt != "next_start" || res.Sandbox.CPU != 6 || res.Sandbox.RAMMB != 6144 || res.Sandbox.DiskGB != 4 {
		t.Fatalf("stopped resize: %+v %v", res, err)
	}
	if _, err := s.Start(ctx, org, sb.ID); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.WaitFor(ctx, org, sb.ID, sandbox.StateRunning, 5*time.Second)
	if err != nil || got.CPU != 6 || got.RAMMB != 6144 || got.Live == nil || got.Live.MaxCPU != 6 || got.Live.MaxRAMMB != 6144 || got.Live.BootRAMMB != 6144 {
		t.Fatalf("after the cold boot: cpu %v ram %d live %+v %v", got.CPU, got.RAMMB, got.Live, err)
	}
	// The new boot's floor: memory goes no lower than 6144 now.
	res, err = s.Resize(ctx, org, sb.ID, ResizeRequest{CPU: ptr(5.0), RAMMB: ptr(1024)})
	if err != nil || res.AppliesAt != "now" || res.Sandbox.CPU != 5 || res.Sandbox.RAMMB != 6144 || !res.Partial {
		t.Errorf("live resize within the new headroom: %+v %v", res, err)
	}
}

// slowStopHost is a fakeHost whose stops wait for release.
type slowStopHost struct {
	*fakeHost
	release   chan struct{}
	lastStart StartSpec // what the last start asked for
}

func (h *slowStopHost) Start(ctx context.Context, spec StartSpec) (Instance, error) {
	h.lastStart = spec
	return h.fakeHost.Start(ctx, spec)
}

func (h *slowStopHost) Stop(ctx context.Context, id string, keepMemory bool) (bool, error) {
	<-h.release
	return h.fakeHost.Stop(ctx, id, keepMemory)
}

// TestResizeWhileStoppingIsPending: a resize while the host is still
// stopping the sandbox answers applies_at "pending" (the API's 202) at
// once, records the size (durable before the stop ends), and the next
// start boots at it.
func TestResizeWhileStoppingIsPending(t *testing.T) {
	h := &slowStopHost{fakeHost: &fakeHost{}, release: make(chan struct{})}
	s, _ := newServiceWith(t, h, "", nil)
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox", CPU: ptr(1.0), RAMMB: ptr(512)})
	if _, err := s.Stop(ctx, org, sb.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, org, sb.ID, false); got.State != sandbox.StateStopping {
		t.Fatalf("state %s, want stopping", got.State)
	}
	res, err := s.Resize(ctx, org, sb.ID, ResizeRequest{CPU: ptr(2.0), RAMMB: ptr(1024)})
	if err != nil || res.AppliesAt != "pending" || res.Sandbox.CPU != 2 || res.Sandbox.RAMMB != 1024 {
		t.Fatalf("resize while stopping: %+v %v", res, err)
	}
	// Recorded before the stop ends: a ptd crash now loses nothing.
	if got, _ := s.Get(ctx, org, sb.ID, false); got.State != sandbox.StateStopping || got.CPU != 2 || got.RAMMB != 1024 {
		t.Fatalf("record while still stopping: %s cpu %v ram %d", got.State, got.CPU, got.RAMMB)
	}
	// Bad input is still refused at once.
	if _, err := s.Resize(ctx, org, sb.ID, ResizeRequest{DiskGB: ptr(1)}); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("disk shrink while stopping: %v", err)
	}
	close(h.release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := s.Get(ctx, org, sb.ID, false)
		if got.State == sandbox.StateStopped && got.CPU == 2 && got.RAMMB == 1024 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending resize never applied: %s cpu %v ram %d", got.State, got.CPU, got.RAMMB)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := s.Start(ctx, org, sb.ID); err != nil {
		t.Fatal(err)
	}
	// The start asks the host for the new size (the real host boots cold
	// when the memory it kept has the old one: e2e TestPendingResizeBootsCold).
	got, _, err := s.WaitFor(ctx, org, sb.ID, sandbox.StateRunning, 5*time.Second)
	if err != nil || got.CPU != 2 || got.RAMMB != 1024 || h.lastStart.CPU != 2 || h.lastStart.RAMMB != 1024 {
		t.Errorf("start after the pending resize: cpu %v ram %d, host asked for %+v: %v", got.CPU, got.RAMMB, h.lastStart, err)
	}
}

// TestLiveResizeWithinOrgPool: sizes stay within the organization's pool,
// as for any create (docs/resize.md). A running sandbox's
// growth past the org's active cpu or ram is 429 quota_exceeded (scope
// org) and changes nothing; a shrink is always allowed.
func TestLiveResizeWithinOrgPool(t *testing.T) {
	s, st := newTestService(t, &fakeHost{})
	ctx := context.Background()
	setOrgDefaults(s, st, func(c *tenancy.Config) { c.OrgMaxCPU, c.OrgMaxRAMMB = 4, 2048 })
	a := running(t, s, CreateRequest{Template: "busybox", CPU: ptr(2.0), RAMMB: ptr(1024)})
	running(t, s, CreateRequest{Template: "busybox", CPU: ptr(1.0), RAMMB: ptr(512)})
	for _, tc := range []struct {
		name  string
		req   ResizeRequest
		limit string
	}{
		{"cpu past the pool", ResizeRequest{CPU: ptr(4.0)}, "cpu"},
		{"ram past the pool", ResizeRequest{RAMMB: ptr(2048)}, "ram_mb"},
		{"up to the pool", ResizeRequest{CPU: ptr(3.0), RAMMB: ptr(1536)}, ""},
		{"shrink", ResizeRequest{CPU: ptr(1.0)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := s.Get(ctx, org, a.ID, false)
			_, err := s.Resize(ctx, org, a.ID, tc.req)
			after, _ := s.Get(ctx, org, a.ID, false)
			var qe *sandbox.QuotaError
			switch {
			case tc.limit == "" && err != nil:
				t.Fatalf("resize: %v", err)
			case tc.limit != "" && (!errors.As(err, &qe) || qe.Scope != "org" || qe.Limit != tc.limit):
				t.Fatalf("err = %v, want an org %s quota error", err, tc.limit)
			case tc.limit != "" && (after.CPU != before.CPU || after.RAMMB != before.RAMMB):
				t.Errorf("a refused resize changed the size")
			}
		})
	}
}

// fixedSizeClassHost is a fakeHost whose gvisor class cannot resize live
// (as the real host reports it) and which counts the live resizes it is
// asked for.
type fixedSizeClassHost struct {
	*fakeHost
	resizes int
}

func (h *fixedSizeClassHost) Info() HostInfo {
	return HostInfo{ID: "host_test", Classes: []ClassInfo{{Name: "runc"}, {Name: "gvisor", NoLiveResize: "the guest keeps its boot size"}}}
}

func (h *fixedSizeClassHost) Resize(ctx context.Context, id string, cpu float64, ramMB int) error {
	h.resizes++
	return nil
}

// TestLiveResizeRefusedWhereTheGuestKeepsItsBootSize: a running sandbox of
// a class that cannot resize live (gvisor) gets NotResizableError naming
// the class and the reason, the host is not asked, and the record keeps
// the size the sandbox has; its disk still grows online, and stopped it
// resizes for the next boot. runc resizes live as before.
func TestLiveResizeRefusedWhereTheGuestKeepsItsBootSize(t *testing.T) {
	h := &fixedSizeClassHost{fakeHost: &fakeHost{}}
	s, _ := newServiceWith(t, h, "", nil)
	ctx := context.Background()
	g := running(t, s, CreateRequest{Template: "busybox", Runtime: "gvisor", CPU: ptr(1.0), RAMMB: ptr(512)})
	for _, r := range []ResizeRequest{{CPU: ptr(2.0), RAMMB: ptr(1024)}, {CPU: ptr(2.0)}, {RAMMB: ptr(1024)}} {
		var nr *NotResizableError
		if _, err := s.Resize(ctx, org, g.ID, r); !errors.As(err, &nr) || !strings.Contains(nr.Reason, "gvisor") || !strings.Contains(nr.Reason, "boot size") {
			t.Errorf("gvisor live resize %+v: %v", r, err)
		}
	}
	if h.resizes != 0 {
		t.Errorf("the host was asked for %d live resizes of a gvisor sandbox", h.resizes)
	}
	if got, _ := s.Get(ctx, org, g.ID, false); got.CPU != 1 || got.RAMMB != 512 {
		t.Errorf("record after refused resizes: cpu %v ram %d", got.CPU, got.RAMMB)
	}
	if res, err := s.Resize(ctx, org, g.ID, ResizeRequest{DiskGB: ptr(4)}); err != nil || res.AppliesAt != "now" || res.Sandbox.DiskGB != 4 {
		t.Errorf("gvisor disk grow: %+v %v", res, err)
	}
	if _, err := s.Stop(ctx, org, g.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.WaitFor(ctx, org, g.ID, sandbox.StateStopped, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Resize(ctx, org, g.ID, ResizeRequest{CPU: ptr(2.0), RAMMB: ptr(1024)}); err != nil || res.AppliesAt != "next_start" || res.Sandbox.CPU != 2 || res.Sandbox.RAMMB != 1024 {
		t.Errorf("stopped gvisor resize: %+v %v", res, err)
	}

	r := running(t, s, CreateRequest{Template: "busybox", Runtime: "runc", CPU: ptr(1.0), RAMMB: ptr(512)})
	if res, err := s.Resize(ctx, org, r.ID, ResizeRequest{CPU: ptr(2.0), RAMMB: ptr(1024)}); err != nil || res.AppliesAt != "now" || res.Sandbox.CPU != 2 || h.resizes != 1 {
		t.Errorf("runc live resize: %+v %v (host resizes %d)", res, err, h.resizes)
	}
}
