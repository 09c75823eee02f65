package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/host/gpu"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestGPUAllocator: sandboxes get distinct GPUs, keep theirs across
// starts, give them back on release, and a stale assignment (its container
// gone) frees its GPUs.
func TestGPUAllocator(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"sbx_a", "sbx_b", "sbx_c", "sbx_d"} {
		if err := os.MkdirAll(filepath.Join(dir, id), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	live := map[string]bool{"sbx_a": true, "sbx_b": true, "sbx_c": true}
	a := &gpuAllocator{
		dir:  dir,
		live: func(_ context.Context, id string) bool { return live[id] },
		inv: gpu.Inventory{GPUs: []gpu.GPU{
			{Index: 0, Model: "NVIDIA A100-SXM4-40GB", CDIDevice: "nvidia.com/gpu=0"},
			{Index: 1, Model: "NVIDIA A100-SXM4-40GB", CDIDevice: "nvidia.com/gpu=1"},
			{Index: 2, Model: "NVIDIA H100 80GB HBM3", CDIDevice: "nvidia.com/gpu=2"},
			{Index: 3, Model: "NVIDIA H100 80GB HBM3"}, // no CDI device
		}},
	}
	ctx := t.Context()
	must := func(id string, n int, model string, want ...string) {
		t.Helper()
		got, err := a.assign(ctx, id, n, model)
		if err != nil {
			t.Fatalf("assign %s: %v", id, err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("assign %s (-want +got):\n%s", id, d)
		}
	}
	must("sbx_a", 1, "", "nvidia.com/gpu=0")
	must("sbx_b", 1, "a100", "nvidia.com/gpu=1")
	must("sbx_a", 1, "", "nvidia.com/gpu=0") // a restart keeps its GPU
	if _, err := a.assign(ctx, "sbx_c", 1, "A100"); !errors.Is(err, sandbox.ErrUnavailable) || !errors.Is(err, gpu.ErrNotEnough) {
		t.Fatalf("a third A100: %v, want unavailable", err)
	}
	if a.holds("sbx_c") {
		t.Fatal("a refused sandbox holds GPUs")
	}
	must("sbx_c", 1, "h100", "nvidia.com/gpu=2")
	if err := a.release("sbx_b"); err != nil || a.holds("sbx_b") {
		t.Fatalf("release: %v", err)
	}
	if err := a.release("sbx_b"); err != nil {
		t.Fatalf("release again: %v", err)
	}
	must("sbx_d", 1, "", "nvidia.com/gpu=1")
	// sbx_a's container is gone but its file stayed (a crash): its GPU is free.
	live["sbx_a"], live["sbx_d"] = false, true
	must("sbx_b", 1, "", "nvidia.com/gpu=0")
	if a.holds("sbx_a") {
		t.Error("the stale assignment is still there")
	}
}
