// Package gpu finds a host's NVIDIA GPUs and says how a sandbox gets
// them (docs/gpus.md): the device nodes and what the driver reports
// (/proc/driver/nvidia, and nvidia-smi when installed), matched with the
// CDI devices that NVIDIA's container toolkit generates
// (`nvidia-ctk cdi generate`), which carry the device nodes, driver
// libraries and hooks a container needs. It also picks which free GPUs a
// sandbox gets.
//
// No machine this code has run on has a GPU: the probe, the CDI matching
// and the picking are tested on fixtures only.
package gpu

import (
	"bufio"

	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/platinum-dev/platinum/internal/hostapi"
)

// Config says where to look.
type Config struct {
	// DevDir holds the device nodes (nvidia0, nvidia1, …).
	DevDir string
	// DriverDir is the kernel driver's proc directory: its version file
	// and gpus/<bus id>/information for each GPU.
	DriverDir string
	// SMI is nvidia-smi's name or path; empty or absent skips it (it adds
	// the index NVML numbers GPUs by and their memory).
	SMI string
	// CDISpecDirs hold the CDI specs (/etc/cdi, /var/run/cdi).
	CDISpecDirs []string
}

// DefaultConfig returns the host's standard places.
func DefaultConfig() Config {
	return Config{DevDir: "/dev", DriverDir: "/proc/driver/nvidia", SMI: "nvidia-smi", CDISpecDirs: slices.Clone(cdi.DefaultSpecDirs)}
}

// GPU is one NVIDIA GPU of the host.
type GPU struct {
	// Index is NVML's (nvidia-smi's) number, else the device minor.
	Index int
	// Minor is the device minor: the node is /dev/nvidia<Minor>.
	Minor int
	// Model is the driver's name for it, e.g. "NVIDIA A100-SXM4-40GB".
	Model string
	// UUID is "GPU-…"; empty when the driver did not say.
	UUID string
	// MemoryMB is the GPU's memory; 0 when unknown (no nvidia-smi).
	MemoryMB int
	// Device is the device node's path on the host.
	Device string
	// CDIDevice is the qualified CDI name ("nvidia.com/gpu=0") whose
	// edits give a container this GPU; empty when no CDI spec does, and
	// then no sandbox can have it.
	CDIDevice string
}

// Inventory is what a probe found.
type Inventory struct {
	GPUs []GPU
	// Driver is the kernel driver's version; empty without a driver.
	Driver string
	// Problem says why GPUs the host has cannot go to sandboxes (no CDI
	// spec names them); empty when every GPU can, or there are none.
	Problem string
}

// Usable returns the GPUs a sandbox can be given (a CDI device names them).
func (inv Inventory) Usable() []GPU {
	var out []GPU
	for _, g := range inv.GPUs {
		if g.CDIDevice != "" {
			out = append(out, g)
		}
	}
	return out
}

// smiTimeout bounds the nvidia-smi call of a probe.
const smiTimeout = 10 * time.Second

// Probe finds the host's GPUs. It never fails: a host without the driver
// simply has none, and what keeps GPUs from sandboxes is in Problem.
func Probe(ctx context.Context, cfg Config) Inventory {
	var inv Inventory
	if b, err := os.ReadFile(filepath.Join(cfg.DriverDir, "version")); err == nil {
		inv.Driver = driverVersion(string(b))
	}
	byMinor := map[int]*GPU{}
	infos, _ := filepath.Glob(filepath.Join(cfg.DriverDir, "gpus", "*", "information"))
	for _, f := range infos {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if g, ok := parseInformation(string(b)); ok {
			byMinor[g.Minor] = &g
		}
	}
	// Device nodes the driver did not describe (no /proc access) still
	// count: the node is what a container gets.
	nodes, _ := filepath.Glob(filepath.Join(cfg.DevDir, "nvidia[0-9]*"))
	present := map[int]bool{}
	for _, n := range nodes {
		minor, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(n), "nvidia"))
		if err != nil || !charDevice(n) {
			continue
		}
		present[minor] = true
		if byMinor[minor] == nil {
			byMinor[minor] = &GPU{Minor: minor, Index: minor, Model: "NVIDIA GPU"}
		}
	}
	if cfg.SMI != "" {
		if path, err := exec.LookPath(cfg.SMI); err == nil {
			cctx, cancel := context.WithTimeout(ctx, smiTimeout)
			out, err := exec.CommandContext(cctx, path, "--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader,nounits").Output()
			cancel()
			if err == nil {
				mergeSMI(byMinor, string(out))
			}
		}
	}
	for minor, g := range byMinor {
		if !present[minor] {
			continue // the driver knows it, but there is no node to give
		}
		g.Device = filepath.Join(cfg.DevDir, "nvidia"+strconv.Itoa(minor))
		inv.GPUs = append(inv.GPUs, *g)
	}
	sort.Slice(inv.GPUs, func(i, j int) bool { return inv.GPUs[i].Index < inv.GPUs[j].Index })
	if len(inv.GPUs) == 0 {
		return inv
	}
	names, err := cdiDevicesByNode(cfg.CDISpecDirs)
	for i := range inv.GPUs {
		inv.GPUs[i].CDIDevice = names["/dev/nvidia"+strconv.Itoa(inv.GPUs[i].Minor)]
	}
	if n := len(inv.GPUs) - len(inv.Usable()); n > 0 {
		inv.Problem = fmt.Sprintf("%d of %d GPUs have no CDI device in %s: generate the spec with `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` (NVIDIA Container Toolkit) and restart ptd",
			n, len(inv.GPUs), strings.Join(cfg.CDISpecDirs, " or "))
		if err != nil {
			inv.Problem += " (" + err.Error() + ")"
		}
	}
	return inv
}

var kernelModule = regexp.MustCompile(`Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)*)\b`)

// driverVersion reads the version out of /proc/driver/nvidia/version
// ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat …",
// or "… Open Kernel Module for x86_64  560.35.03  Release Build …").
func driverVersion(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if m := kernelModule.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return strings.TrimSpace(line)
}

// parseInformation reads /proc/driver/nvidia/gpus/<bus>/information:
// "Model:", "GPU UUID:" and "Device Minor:" lines.
func parseInformation(s string) (GPU, bool) {
	var g GPU
	minor := -1
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "Model":
			g.Model = v
		case "GPU UUID":
			g.UUID = v
		case "Device Minor":
			if n, err := strconv.Atoi(v); err == nil {
				minor = n
			}
		}
	}
	if minor < 0 {
		return GPU{}, false
	}
	g.Minor, g.Index = minor, minor
	if g.Model == "" {
		g.Model = "NVIDIA GPU"
	}
	return g, true
}

// mergeSMI adds nvidia-smi's index and memory to the GPUs it names by
// UUID ("0, GPU-…, NVIDIA A100-SXM4-40GB, 40960" per line).
func mergeSMI(byMinor map[int]*GPU, out string) {
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, ",")
		if len(f) != 4 {
			continue
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		for _, g := range byMinor {
			if g.UUID != "" && g.UUID == f[1] {
				g.Index = idx
				if f[2] != "" {
					g.Model = f[2]
				}
				if mb, err := strconv.Atoi(f[3]); err == nil {
					g.MemoryMB = mb
				}
			}
		}
	}
}

// charDevice tells a device node from anything else at that path (tests
// replace it: fixtures cannot hold device nodes).
var charDevice = isCharDevice

func isCharDevice(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice != 0
}

// cdiDevicesByNode maps each GPU device node to the CDI device that
// gives exactly that one node: NVIDIA's spec names each GPU by index
// and/or UUID and adds "all", which gives every node and so is never
// picked for one GPU. Of several names for a node the first in sort order
// wins, so the choice is stable.
func cdiDevicesByNode(dirs []string) (map[string]string, error) {
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("CDI specs: %w", err)
	}
	var problems []error
	for path, errs := range cache.GetErrors() {
		problems = append(problems, fmt.Errorf("%s: %w", path, errors.Join(errs...)))
	}
	out := map[string]string{}
	names := cache.ListDevices() // sorted
	for _, name := range names {
		vendor, class, _ := parseQualified(name)
		if vendor != "nvidia.com" || class != "gpu" {
			continue
		}
		d := cache.GetDevice(name)
		if d == nil || d.ContainerEdits.DeviceNodes == nil {
			continue
		}
		var gpuNodes []string
		for _, n := range d.ContainerEdits.DeviceNodes {
			p := n.HostPath
			if p == "" {
				p = n.Path
			}
			if isGPUNode(p) {
				gpuNodes = append(gpuNodes, p)
			}
		}
		if len(gpuNodes) != 1 {
			continue
		}
		if _, taken := out[gpuNodes[0]]; !taken {
			out[gpuNodes[0]] = name
		}
	}
	return out, errors.Join(problems...)
}

// isGPUNode is true for /dev/nvidia<N> (not nvidiactl, nvidia-uvm, …).
func isGPUNode(p string) bool {
	n, ok := strings.CutPrefix(p, "/dev/nvidia")
	if !ok || n == "" {
		return false
	}
	_, err := strconv.Atoi(n)
	return err == nil
}

// parseQualified splits "vendor/class=name".
func parseQualified(s string) (vendor, class, name string) {
	vc, name, _ := strings.Cut(s, "=")
	vendor, class, _ = strings.Cut(vc, "/")
	return vendor, class, name
}

// ErrNotEnough is Pick's answer when too few matching GPUs are free.
var ErrNotEnough = errors.New("not enough free GPUs")

// Pick chooses n usable GPUs of the model (hostapi.MatchGPUModel) that inUse (CDI
// device names) does not hold, lowest index first, or fails with an error
// wrapping ErrNotEnough that says what is free.
func Pick(gpus []GPU, inUse map[string]bool, n int, model string) ([]GPU, error) {
	var out []GPU
	matching := 0
	for _, g := range gpus {
		if g.CDIDevice == "" || !hostapi.MatchGPUModel(g.Model, model) {
			continue
		}
		matching++
		if !inUse[g.CDIDevice] && len(out) < n {
			out = append(out, g)
		}
	}
	if len(out) < n {
		what := "GPUs"
		if model != "" {
			what = fmt.Sprintf("%q GPUs", model)
		}
		return nil, fmt.Errorf("%d %s wanted, %d of this host's %d are free: %w", n, what, len(out), matching, ErrNotEnough)
	}
	return out, nil
}

// Names returns the CDI device names of gpus.
func Names(gpus []GPU) []string {
	out := make([]string, len(gpus))
	for i, g := range gpus {
		out[i] = g.CDIDevice
	}
	return out
}
