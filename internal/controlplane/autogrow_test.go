package controlplane

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// diskUsageHost is a fakeHost that reports disk usage the cheap way and
// fails Metrics, so autogrow must not sample metrics.
type diskUsageHost struct {
	*fakeHost
	used    atomic.Uint64
	metrics atomic.Int64
}

func (h *diskUsageHost) DiskUsage(ctx context.Context, id string) (used, size uint64, err error) {
	return h.used.Load(), 100, nil
}

func (h *diskUsageHost) Metrics(ctx context.Context, id string) (Metrics, error) {
	h.metrics.Add(1)
	return Metrics{}, errors.New("metrics sampled")
}

func TestDiskAutogrowReadsDiskUsageOnly(t *testing.T) {
	h := &diskUsageHost{fakeHost: &fakeHost{}}
	h.used.Store(95)
	s, _ := newServiceWith(t, h, "", func(c *Config) { c.DiskAutogrowMaxGB = 20 })
	ctx := context.Background()
	sb := running(t, s, CreateRequest{Template: "busybox", DiskGB: ptr(4)})
	tests := []struct {
		name   string
		used   uint64
		wantGB int
	}{
		{"over 90% grows by at least 10 GB", 95, 14},
		{"capped at the limit", 95, 20},
		{"below 90% stays", 10, 20},
	}
	for _, tt := range tests {
		h.used.Store(tt.used)
		s.runTimers(ctx)
		if got, _ := s.Get(ctx, org, sb.ID, false); got.DiskGB != tt.wantGB {
			t.Errorf("%s: disk = %d GB, want %d", tt.name, got.DiskGB, tt.wantGB)
		}
	}
	if n := h.metrics.Load(); n != 0 {
		t.Errorf("autogrow sampled Metrics %d times; want DiskUsage only", n)
	}
}
