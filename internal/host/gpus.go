package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/platinum-dev/platinum/internal/host/gpu"
	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// GPUs (docs/gpus.md): the host probes its NVIDIA GPUs once at Open, and
// gives each GPU sandbox whole GPUs at every start, through their CDI
// devices. Which sandbox holds which GPU is a file in the sandbox's
// directory (gpusFile: the CDI names, one a line), written before its
// container starts and removed when it stops, so a ptd restart finds the
// assignments again; a file whose container is gone (a crash between the
// stop and the removal) holds nothing. None of this has run on a machine
// with a GPU.

// gpusFile names the CDI devices a sandbox's container was given.
const gpusFile = "gpus"

// gpuAllocator hands out the host's GPUs.
type gpuAllocator struct {
	inv gpu.Inventory
	// dir holds the sandboxes' directories (<data-dir>/sandboxes).
	dir string
	// live reports whether a sandbox's container exists (running or
	// frozen); a GPU file of one that does not is stale.
	live func(ctx context.Context, id string) bool

	mu sync.Mutex
}

// assign returns the CDI devices sandbox id runs with: the ones it holds
// when they are still the host's, else n free GPUs of model. Not enough
// free GPUs wraps sandbox.ErrUnavailable.
func (a *gpuAllocator) assign(ctx context.Context, id string, n int, model string) ([]string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	usable := a.inv.Usable()
	if held := a.held(id); len(held) == n && allUsable(held, usable, model) {
		return held, nil
	}
	inUse := map[string]bool{}
	entries, _ := os.ReadDir(a.dir)
	for _, e := range entries {
		other := e.Name()
		if other == id {
			continue
		}
		held := a.held(other)
		if len(held) == 0 {
			continue
		}
		if !a.live(ctx, other) {
			a.release(other)
			continue
		}
		for _, d := range held {
			inUse[d] = true
		}
	}
	picked, err := gpu.Pick(usable, inUse, n, model)
	if err != nil {
		return nil, fmt.Errorf("host: gpus: %w: %w", err, sandbox.ErrUnavailable)
	}
	names := gpu.Names(picked)
	path := filepath.Join(a.dir, id, gpusFile)
	if err := os.WriteFile(path+".tmp", []byte(strings.Join(names, "\n")+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("host: gpus: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return nil, fmt.Errorf("host: gpus: %w", err)
	}
	return names, nil
}

// held returns the CDI devices recorded for sandbox id.
func (a *gpuAllocator) held(id string) []string {
	b, err := os.ReadFile(filepath.Join(a.dir, id, gpusFile))
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// holds reports whether sandbox id holds GPUs.
func (a *gpuAllocator) holds(id string) bool {
	_, err := os.Stat(filepath.Join(a.dir, id, gpusFile))
	return err == nil
}

// release gives sandbox id's GPUs back. Idempotent.
func (a *gpuAllocator) release(id string) error {
	err := os.Remove(filepath.Join(a.dir, id, gpusFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// allUsable reports whether every name is a usable GPU of model.
func allUsable(names []string, usable []gpu.GPU, model string) bool {
	for _, n := range names {
		ok := false
		for _, g := range usable {
			ok = ok || (g.CDIDevice == n && hostapi.MatchGPUModel(g.Model, model))
		}
		if !ok {
			return false
		}
	}
	return true
}

// gpuInfo is the inventory as GET /v1/hosts shows it.
func gpuInfo(inv gpu.Inventory) []hostapi.GPU {
	out := make([]hostapi.GPU, 0, len(inv.GPUs))
	for _, g := range inv.GPUs {
		out = append(out, hostapi.GPU{Index: g.Index, Model: g.Model, UUID: g.UUID, MemoryMB: g.MemoryMB, Device: g.Device, CDIDevice: g.CDIDevice})
	}
	return out
}

// containerLive reports whether sandbox id has a container on its class.
func (h *Host) containerLive(ctx context.Context, id string) bool {
	_, err := h.runtimeOf(ctx, id).State(ctx, id)
	return !errors.Is(err, runtime.ErrNotFound)
}
