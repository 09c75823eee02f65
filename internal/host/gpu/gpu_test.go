package gpu

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fixture is testdata/probe: two A100s as the driver and
// `nvidia-ctk cdi generate` describe them. Fixtures cannot hold device
// nodes, so regular files stand in for them, and the PCI bus directories
// are named with "-" for ":" (module zips refuse colons).
func fixture(t *testing.T) Config {
	t.Helper()
	old := charDevice
	charDevice = func(p string) bool { fi, err := os.Stat(p); return err == nil && fi.Mode().IsRegular() }
	t.Cleanup(func() { charDevice = old })
	root, err := filepath.Abs(filepath.Join("testdata", "probe"))
	if err != nil {
		t.Fatal(err)
	}
	return Config{DevDir: filepath.Join(root, "dev"), DriverDir: filepath.Join(root, "driver"), CDISpecDirs: []string{filepath.Join(root, "cdi")}}
}

func TestProbe(t *testing.T) {
	cfg := fixture(t)
	inv := Probe(t.Context(), cfg)
	want := Inventory{
		Driver: "535.104.05",
		GPUs: []GPU{
			{Index: 0, Minor: 0, Model: "NVIDIA A100-SXM4-40GB", UUID: "GPU-4b4f6d2a-1c1e-5c3a-9d0e-9a3c2b1f0a11",
				Device: filepath.Join(cfg.DevDir, "nvidia0"), CDIDevice: "nvidia.com/gpu=0"},
			// Named twice (index and UUID): the first in sort order, never "all".
			{Index: 1, Minor: 1, Model: "NVIDIA A100-SXM4-40GB", UUID: "GPU-9e0c1a7b-2d3f-4e5a-8b6c-7d8e9f0a1b22",
				Device: filepath.Join(cfg.DevDir, "nvidia1"), CDIDevice: "nvidia.com/gpu=1"},
		},
	}
	if d := cmp.Diff(want, inv); d != "" {
		t.Errorf("inventory (-want +got):\n%s", d)
	}
	if len(inv.Usable()) != 2 {
		t.Errorf("usable: %d", len(inv.Usable()))
	}
}

func TestProbeWithoutCDISpec(t *testing.T) {
	cfg := fixture(t)
	cfg.CDISpecDirs = []string{t.TempDir()}
	inv := Probe(t.Context(), cfg)
	if len(inv.GPUs) != 2 || len(inv.Usable()) != 0 {
		t.Fatalf("gpus %d usable %d, want 2 and 0", len(inv.GPUs), len(inv.Usable()))
	}
	if !strings.Contains(inv.Problem, "2 of 2 GPUs have no CDI device") || !strings.Contains(inv.Problem, "nvidia-ctk cdi generate") {
		t.Errorf("problem %q does not say why and what to run", inv.Problem)
	}
}

func TestProbeNoGPUs(t *testing.T) {
	cfg := Config{DevDir: t.TempDir(), DriverDir: filepath.Join(t.TempDir(), "absent"), SMI: "no-such-nvidia-smi"}
	if inv := Probe(t.Context(), cfg); len(inv.GPUs) != 0 || inv.Driver != "" || inv.Problem != "" {
		t.Fatalf("a host without a driver: %+v", inv)
	}
	// This machine: whatever it has, the probe must not fail or invent.
	inv := Probe(t.Context(), DefaultConfig())
	for _, g := range inv.GPUs {
		if _, err := os.Stat(g.Device); err != nil {
			t.Errorf("reported %s, which does not exist", g.Device)
		}
	}
}

func TestMergeSMI(t *testing.T) {
	a := &GPU{Minor: 0, Index: 0, UUID: "GPU-a", Model: "NVIDIA GPU"}
	b := &GPU{Minor: 1, Index: 1, UUID: "GPU-b", Model: "NVIDIA GPU"}
	// NVML orders by PCI bus; minors may differ from that order.
	mergeSMI(map[int]*GPU{0: a, 1: b}, "1, GPU-a, NVIDIA H100 80GB HBM3, 81559\n0, GPU-b, NVIDIA H100 80GB HBM3, 81559\n")
	if a.Index != 1 || b.Index != 0 || a.MemoryMB != 81559 || a.Model != "NVIDIA H100 80GB HBM3" {
		t.Errorf("after merge: %+v %+v", *a, *b)
	}
}

func TestPick(t *testing.T) {
	gpus := []GPU{
		{Index: 0, Model: "NVIDIA A100-SXM4-40GB", CDIDevice: "nvidia.com/gpu=0"},
		{Index: 1, Model: "NVIDIA A100-SXM4-40GB", CDIDevice: "nvidia.com/gpu=1"},
		{Index: 2, Model: "NVIDIA H100 80GB HBM3", CDIDevice: "nvidia.com/gpu=2"},
		{Index: 3, Model: "NVIDIA H100 80GB HBM3"}, // no CDI device: never given
	}
	tests := []struct {
		name  string
		inUse []string
		n     int
		model string
		want  []string
		err   string
	}{
		{name: "lowest first", n: 2, want: []string{"nvidia.com/gpu=0", "nvidia.com/gpu=1"}},
		{name: "skips busy", inUse: []string{"nvidia.com/gpu=0"}, n: 2, want: []string{"nvidia.com/gpu=1", "nvidia.com/gpu=2"}},
		{name: "model, case-insensitive", n: 1, model: "h100", want: []string{"nvidia.com/gpu=2"}},
		{name: "model busy", inUse: []string{"nvidia.com/gpu=2"}, n: 1, model: "H100", err: `1 "H100" GPUs wanted, 0 of this host's 1 are free`},
		{name: "more than usable", n: 4, err: "4 GPUs wanted, 3 of this host's 3 are free"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inUse := map[string]bool{}
			for _, u := range tc.inUse {
				inUse[u] = true
			}
			got, err := Pick(gpus, inUse, tc.n, tc.model)
			if tc.err != "" {
				if !errors.Is(err, ErrNotEnough) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, Names(got)); d != "" {
				t.Errorf("picked (-want +got):\n%s", d)
			}
		})
	}
}

func TestDriverVersion(t *testing.T) {
	for in, want := range map[string]string{
		"NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n":                                          "550.54.15",
		"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  560.35.03  Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Aug 22 2024\n": "560.35.03",
		"something else\n": "something else",
	} {
		if got := driverVersion(in); got != want {
			t.Errorf("driverVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
