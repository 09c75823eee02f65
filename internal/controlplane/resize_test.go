package controlplane

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestStoppedResizeBootsWithNewHeadroom: seed 004, "A cold-booted resize
// gives the sandbox new room to grow live." A running sandbox cannot go
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
