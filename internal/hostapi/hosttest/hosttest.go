// Package hosttest is a Host for tests of what sits above a host: the
// control plane, its parts and the transports, which need sandboxes that
// start, stop and report without real containers. Every method calls its
// Func field when set; unset, the host behaves like a healthy, idle one:
// starts succeed at 127.0.0.1, a stop keeps memory when asked and the next
// start restores it, builds succeed at once, and destroys are recorded.
// Optional abilities (snapshots, network changes) are for a test's own
// type to add by embedding *Host.
package hosttest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/platinum-dev/platinum/internal/hostapi"
)

// Host is a hostapi.Host whose behaviour a test sets through its fields.
// Its zero value is ready to use.
type Host struct {
	StartFunc func(ctx context.Context, spec hostapi.StartSpec) (hostapi.Instance, error)
	// StopFunc, when set, runs before a stop is recorded; its error fails
	// the stop.
	StopFunc    func(ctx context.Context, id string, keepMemory bool) error
	BuildFunc   func(ctx context.Context, slug, versionID string, progress func(string)) (string, int64, error)
	DestroyFunc func(ctx context.Context, id string) error
	MetricsFunc func(id string) (hostapi.Metrics, error)
	// RunningFunc, when set, answers Running (otherwise every sandbox runs).
	RunningFunc func(id string) bool
	// ResizeFunc, when set, answers live resizes (the cpu and ram_mb the
	// sandbox would have). Its error is the host's: sandbox.ErrUnavailable
	// is a host that cannot resize live, sandbox.ErrConflict a sandbox that
	// cannot free that much memory (docs/resize.md, "Live").
	ResizeFunc func(ctx context.Context, id string, cpu float64, ramMB int) error
	// GrowErr is what GrowDisk answers.
	GrowErr error
	// DiskImageFile is what DiskImage returns; empty means the host has no
	// disks (an error).
	DiskImageFile string
	// GPUs and GPUProblem are what Info reports.
	GPUs       []hostapi.GPU
	GPUProblem string

	removedDisk atomic.Bool
	builds      atomic.Int32

	mu        sync.Mutex
	destroyed []string
	frozen    map[string]bool
}

var _ hostapi.Host = (*Host)(nil)

// ID implements hostapi.Host.
func (h *Host) ID() string { return "host_test" }

// Templates implements hostapi.Host.
func (h *Host) Templates() []string { return []string{"busybox", "pt-base"} }

// Classes implements hostapi.Host.
func (h *Host) Classes() []string { return []string{"runc", "gvisor"} }

// Info implements hostapi.Host.
func (h *Host) Info() hostapi.HostInfo {
	return hostapi.HostInfo{ID: "host_test", GPUs: h.GPUs, GPUProblem: h.GPUProblem}
}

// BuildTemplate implements hostapi.Host.
func (h *Host) BuildTemplate(ctx context.Context, slug, versionID string, progress func(string)) (string, int64, error) {
	h.builds.Add(1)
	if h.BuildFunc != nil {
		return h.BuildFunc(ctx, slug, versionID, progress)
	}
	return "/templates/" + versionID, 1, nil
}

// Builds counts BuildTemplate calls.
func (h *Host) Builds() int32 { return h.builds.Load() }

// Start implements hostapi.Host.
func (h *Host) Start(ctx context.Context, spec hostapi.StartSpec) (hostapi.Instance, error) {
	if h.StartFunc != nil {
		return h.StartFunc(ctx, spec)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	thawed := h.frozen[spec.ID]
	delete(h.frozen, spec.ID)
	return hostapi.Instance{Address: "127.0.0.1", MemoryRestored: thawed}, nil
}

// Running implements hostapi.Host.
func (h *Host) Running(ctx context.Context, id string) bool {
	return h.RunningFunc == nil || h.RunningFunc(id)
}

// Stop implements hostapi.Host: memory is kept when asked.
func (h *Host) Stop(ctx context.Context, id string, keepMemory bool) (bool, error) {
	if h.StopFunc != nil {
		if err := h.StopFunc(ctx, id, keepMemory); err != nil {
			return false, err
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.frozen == nil {
		h.frozen = map[string]bool{}
	}
	h.frozen[id] = keepMemory
	return keepMemory, nil
}

// Frozen implements hostapi.Host.
func (h *Host) Frozen(ctx context.Context, id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.frozen[id]
}

// DiskImage implements hostapi.Host.
func (h *Host) DiskImage(ctx context.Context, id string) (string, error) {
	if h.DiskImageFile == "" {
		return "", errors.New("the test host has no disks")
	}
	return h.DiskImageFile, nil
}

// DiskImagePath implements hostapi.Host.
func (h *Host) DiskImagePath(id string) string { return "" }

// RemoveDisk implements hostapi.Host: the disk goes, and with it any
// memory a stop kept (the next start boots from a restored disk).
func (h *Host) RemoveDisk(ctx context.Context, id string) error {
	h.mu.Lock()
	delete(h.frozen, id)
	h.mu.Unlock()
	h.removedDisk.Store(true)
	return nil
}

// RemovedDisk reports whether RemoveDisk was called.
func (h *Host) RemovedDisk() bool { return h.removedDisk.Load() }

// Destroy implements hostapi.Host.
func (h *Host) Destroy(ctx context.Context, id string) error {
	h.mu.Lock()
	h.destroyed = append(h.destroyed, id)
	h.mu.Unlock()
	if h.DestroyFunc != nil {
		return h.DestroyFunc(ctx, id)
	}
	return nil
}

// Destroyed lists the sandboxes Destroy was called for, in order.
func (h *Host) Destroyed() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.destroyed...)
}

// Resize implements hostapi.Host: it succeeds unless ResizeFunc answers.
func (h *Host) Resize(ctx context.Context, id string, cpu float64, ramMB int) error {
	if h.ResizeFunc != nil {
		return h.ResizeFunc(ctx, id, cpu, ramMB)
	}
	return nil
}

// GrowDisk implements hostapi.Host.
func (h *Host) GrowDisk(ctx context.Context, id string, newGB int) error { return h.GrowErr }

// Metrics implements hostapi.Host.
func (h *Host) Metrics(ctx context.Context, id string) (hostapi.Metrics, error) {
	if h.MetricsFunc != nil {
		return h.MetricsFunc(id)
	}
	return hostapi.Metrics{}, nil
}
