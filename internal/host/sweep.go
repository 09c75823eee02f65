package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/platinum-dev/platinum/internal/host/disk"
	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/runtime/oci"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

var (
	_ hostapi.Sweeper     = (*Host)(nil)
	_ hostapi.Releaser    = (*Host)(nil)
	_ hostapi.DiskChecker = (*Host)(nil)
)

// Holdings implements hostapi.Sweeper: every sandbox that holds anything
// on this host, found from the host itself rather than from any record —
// runtime containers under both classes' state roots, processes and
// cgroups under CgroupParent, mounts under the data dir's sandboxes/, loop
// devices backed by their disk images, network namespaces and endpoints,
// and the disk images and sandbox directories. A network namespace of this
// bridge that belongs to none of those IDs (its name is a hash, so nothing
// else could name it) is removed on the way.
func (h *Host) Holdings(ctx context.Context) ([]hostapi.Holding, error) {
	byID := map[string]*hostapi.Holding{}
	get := func(id string) *hostapi.Holding {
		if !sandbox.ValidID(sandbox.PrefixSandbox, id) {
			return nil
		}
		if byID[id] == nil {
			byID[id] = &hostapi.Holding{ID: id}
		}
		return byID[id]
	}
	var errs []error
	for class, rt := range h.rts {
		cs, err := rt.List(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s containers: %w", class, err))
			continue
		}
		for _, c := range cs {
			if hd := get(c.ID); hd != nil {
				hd.Container = true
			}
		}
	}
	for id, procs := range oci.CgroupChildren(h.cfg.CgroupParent) {
		if hd := get(id); hd != nil {
			hd.Cgroup = true
			if len(procs) > 0 {
				hd.Container = true
			}
		}
	}
	sandboxes := filepath.Join(h.cfg.DataDir, "sandboxes") + "/"
	for _, mp := range mountPoints() {
		if rest, ok := strings.CutPrefix(mp, sandboxes); ok {
			id, _, _ := strings.Cut(rest, "/")
			if hd := get(id); hd != nil {
				hd.Mounts = true
			}
		}
	}
	images := filepath.Dir(h.pool.ImagePath("x")) + "/"
	for _, backing := range disk.LoopBackingFiles() {
		if rest, ok := strings.CutPrefix(backing, images); ok {
			if hd := get(strings.TrimSuffix(strings.TrimSuffix(rest, " (deleted)"), ".img")); hd != nil {
				hd.Mounts = true
			}
		}
	}
	if entries, err := os.ReadDir(filepath.Dir(h.pool.ImagePath("x"))); err == nil {
		for _, e := range entries {
			if hd := get(strings.TrimSuffix(e.Name(), ".img")); hd != nil && strings.HasSuffix(e.Name(), ".img") {
				hd.Disk = true
			}
		}
	}
	if entries, err := os.ReadDir(sandboxes); err == nil {
		for _, e := range entries {
			if hd := get(e.Name()); hd != nil {
				hd.Disk = true
			}
		}
	}
	for _, ep := range h.net.Endpoints() {
		if hd := get(ep.ID); hd != nil {
			hd.Network = true
		}
	}
	known := make([]string, 0, len(byID))
	for id, hd := range byID {
		known = append(known, id)
		if h.net.HasNamespace(id) {
			hd.Network = true
		}
	}
	if removed, err := h.net.RemoveUnknown(ctx, known); err != nil {
		errs = append(errs, err)
	} else if len(removed) > 0 {
		h.log.WarnContext(ctx, "removed network namespaces of no sandbox", "netns", removed)
	}
	out := make([]hostapi.Holding, 0, len(byID))
	for _, hd := range byID {
		out = append(out, *hd)
	}
	return out, errors.Join(errs...)
}

// Release implements hostapi.Releaser: the container of every class ends
// (and any process left in the sandbox's cgroup, which the cgroup's
// removal ends), the root filesystem and disk are unmounted (freeing the
// loop device), a kept checkpoint is dropped, and the network namespace and
// address are given back. The disk image and the sandbox's directory stay,
// so a start boots it again from its disk, with a new address.
func (h *Host) Release(ctx context.Context, id string) error {
	p, err := h.leaving(id)
	if err != nil {
		return err
	}
	var errs []error
	for _, rt := range h.rts {
		errs = append(errs, rt.Delete(ctx, id))
	}
	errs = append(errs, oci.RemoveCgroup(ctx, h.cgroupPath(id)))
	errs = append(errs, h.removeCheckpoint(id))
	syncfs(p.diskMnt)
	errs = append(errs, disk.Unmount(ctx, p.rootfs), h.pool.UnmountImage(ctx, p.diskMnt))
	h.forgetEgress(id)
	errs = append(errs, h.net.Detach(ctx, id))
	os.Remove(filepath.Join(p.dir, addressFile))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("host: release %s: %w", id, err)
	}
	return nil
}

// cgroupPath is the sandbox's cgroup under CgroupParent.
func (h *Host) cgroupPath(id string) string { return h.cfg.CgroupParent + "/" + id }

// mountPoints lists this process's mount points (mountinfo's fifth
// field, unescaped).
func mountPoints() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out
}
