package oci

import (
	"fmt"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// GPUs reach a container through the Container Device Interface
// (docs/gpus.md): NVIDIA's container toolkit writes a CDI spec
// (`nvidia-ctk cdi generate`) naming each GPU and the edits a container
// needs for it (device nodes, the driver's libraries and binaries as bind
// mounts, hooks that refresh the linker cache, env). We apply those edits
// to config.json with the CDI project's own library, as containerd and
// CRI-O do, so the device cgroup rules, mounts and hooks are exactly the
// vendor's. runc then creates the nodes and runs the hooks; runsc also
// gets --nvproxy, its proxy of the NVIDIA driver's ioctls (gVisor's GPU
// support), and finds the GPUs among the spec's devices.
//
// Untested on a real GPU here: no machine this runs on has one. The unit
// tests apply a fixture spec and pin the generated config and flags.

// DefaultCDISpecDirs are where CDI specs are read from by default:
// /etc/cdi, then /var/run/cdi (which wins on conflicts).
var DefaultCDISpecDirs = slices.Clone(cdi.DefaultSpecDirs)

// validateCDIDevices checks that each name is a qualified CDI device
// (vendor.com/class=name).
func validateCDIDevices(names []string) error {
	for _, n := range names {
		if _, _, _, err := parser.ParseQualifiedName(n); err != nil {
			return fmt.Errorf("spec CDIDevices: %q: %v: %w", n, err, sandbox.ErrInvalidArgument)
		}
	}
	return nil
}

// injectCDI applies the CDI edits of s.CDIDevices, read from the spec
// dirs, to cfg. A device no spec names (the host's CDI spec changed since
// the GPUs were probed) wraps sandbox.ErrUnavailable.
func injectCDI(cfg *specs.Spec, s runtime.Spec, dirs []string) error {
	if len(s.CDIDevices) == 0 {
		return nil
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		return fmt.Errorf("CDI specs in %v: %v: %w", dirs, err, sandbox.ErrUnavailable)
	}
	if unresolved, err := cache.InjectDevices(cfg, s.CDIDevices...); err != nil {
		return fmt.Errorf("CDI devices %v (unresolved %v) from %v: %v: %w", s.CDIDevices, unresolved, dirs, err, sandbox.ErrUnavailable)
	}
	// CDI's mounts carry "bind" only among their options; name the type
	// as our own bind mounts do, which both runtimes read the same way.
	for i, m := range cfg.Mounts {
		if m.Type == "" && (slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind")) {
			cfg.Mounts[i].Type = "bind"
		}
	}
	return nil
}

// gpuFlags are runsc's per-container flags for a container with CDI
// devices: --nvproxy lets the sandbox drive the host's NVIDIA GPUs.
func (r *Runtime) gpuFlags(spec runtime.Spec) []string {
	if r.gvisor && len(spec.CDIDevices) > 0 {
		return []string{"--nvproxy"}
	}
	return nil
}
