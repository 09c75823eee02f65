package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/runtime/cgmount"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// runsc has no update command, but it runs the whole sandbox (the sentry,
// the gofer and, with systrap, one stub per sandbox process) in the host
// cgroup config.json names, and the sentry's memory (a memfd it faults in)
// is charged to that cgroup. So a live resize of a gVisor sandbox is a
// write to that cgroup's files: the host enforces the new CPU quota,
// cpuset, memory and pids limits at once, as `runc update` would. What
// gVisor shows inside (/proc/meminfo, the number of CPUs) keeps the size
// it booted with until the next cold boot.

// cgroupMount is one mounted cgroup hierarchy: v1 with its controllers, or
// the unified (v2) one.
type cgroupMount struct {
	dir         string
	v2          bool
	controllers []string // v1 only
}

// cgroupMounts lists the cgroup hierarchies mounted on this host: every
// one, also v1 hierarchies without a controller ptd sets (blkio, devices,
// freezer, name=systemd), where runc makes a container's cgroup too and,
// when its delete meets tasks still exiting, leaves it (RemoveCgroup must
// see them: a load run found them left after some deletes under load).
//
// The list is read once and kept: the hierarchies are mounted before ptd
// starts and stay, while mountinfo, which the kernel formats in full (every
// sandbox's own mounts too) on each read, was read about six times per
// create and delete, 2% of ptd's CPU in a burst of creates (a perf profile
// of the cold-create bench). An error or an empty list is not kept. The
// slice is shared: callers only read it.
func cgroupMounts() ([]cgroupMount, error) {
	cgMounts.mu.Lock()
	defer cgMounts.mu.Unlock()
	if cgMounts.list != nil {
		return cgMounts.list, nil
	}
	ms, err := readCgroupMounts()
	if err == nil && len(ms) > 0 {
		cgMounts.list = ms
	}
	return ms, err
}

// cgMounts is cgroupMounts' kept list.
var cgMounts struct {
	mu   sync.Mutex
	list []cgroupMount
}

// readCgroupMounts reads the list from mountinfo.
func readCgroupMounts() ([]cgroupMount, error) {
	ms, err := cgmount.List()
	var out []cgroupMount
	for _, m := range ms {
		if m.V2 {
			out = append(out, cgroupMount{dir: m.Dir, v2: true})
			continue
		}
		var ctrls []string
		for _, o := range m.Options {
			switch o {
			case "cpu", "cpuacct", "cpuset", "memory", "pids":
				ctrls = append(ctrls, o)
			}
		}
		out = append(out, cgroupMount{dir: m.Dir, controllers: ctrls})
	}
	return out, err
}

// cgroupDir returns the directory of cgroup path for controller: the v1
// hierarchy that has it, else the unified one when the controller is
// enabled there for that cgroup. v2 reports whether it is the unified one.
func cgroupDir(mounts []cgroupMount, controller, path string) (dir string, v2 bool, ok bool) {
	for _, m := range mounts {
		if !m.v2 && slices.Contains(m.controllers, controller) {
			d := filepath.Join(m.dir, path)
			if _, err := os.Stat(d); err == nil {
				return d, false, true
			}
		}
	}
	for _, m := range mounts {
		if !m.v2 {
			continue
		}
		d := filepath.Join(m.dir, path)
		b, err := os.ReadFile(filepath.Join(d, "cgroup.controllers"))
		if err == nil && slices.Contains(strings.Fields(string(b)), controller) {
			return d, true, true
		}
	}
	return "", false, false
}

// bundleCgroupPath reads the cgroup path config.json gave the container.
func bundleCgroupPath(bundle string) (string, error) {
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return "", err
	}
	var cfg specs.Spec
	if err := json.Unmarshal(b, &cfg); err != nil {
		return "", fmt.Errorf("config.json: %w", err)
	}
	if cfg.Linux == nil || cfg.Linux.CgroupsPath == "" {
		return "", errors.New("config.json names no cgroup")
	}
	return cfg.Linux.CgroupsPath, nil
}

// updateCgroup changes the limits of a running gVisor sandbox by writing
// its host cgroup (see the comment at the top of this file). Zero fields
// are left unchanged. A memory limit the kernel refuses (below what the
// sandbox uses and cannot give back) wraps sandbox.ErrConflict; the other
// limits may already have changed then, as with `runc update`.
func (r *Runtime) updateCgroup(ctx context.Context, id string, res runtime.Resources) error {
	s, err := r.state(ctx, id)
	if err != nil {
		return err
	}
	if s.Status != string(runtime.StatusRunning) && s.Status != string(runtime.StatusPaused) {
		return fmt.Errorf("container is %s: %w", s.Status, sandbox.ErrConflict)
	}
	path, err := bundleCgroupPath(s.Bundle)
	if err != nil {
		return fmt.Errorf("cgroup: %w: %w", err, sandbox.ErrUnavailable)
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return fmt.Errorf("cgroup mounts: %w: %w", err, sandbox.ErrUnavailable)
	}
	dir := func(controller string) (string, bool, error) {
		d, v2, ok := cgroupDir(mounts, controller, path)
		if !ok {
			return "", false, fmt.Errorf("cgroup %s has no %s controller: %w", path, controller, sandbox.ErrUnavailable)
		}
		return d, v2, nil
	}
	if res.CPU > 0 {
		d, v2, err := dir("cpu")
		if err != nil {
			return err
		}
		q := strconv.FormatInt(cpuQuota(res.CPU), 10)
		if v2 {
			err = writeCgroup(d, "cpu.max", q+" "+strconv.Itoa(cpuPeriod))
		} else {
			err = errors.Join(writeCgroup(d, "cpu.cfs_period_us", strconv.Itoa(cpuPeriod)), writeCgroup(d, "cpu.cfs_quota_us", q))
		}
		if err != nil {
			return err
		}
	}
	if res.CPUs != "" {
		d, _, err := dir("cpuset")
		if err != nil {
			return err
		}
		if err := writeCgroup(d, "cpuset.cpus", res.CPUs); err != nil {
			return err
		}
	}
	tasks := gvisorTasks(res.Pids, res.MemoryBytes)
	if res.Pids > 0 {
		d, _, err := dir("pids")
		if err != nil {
			return err
		}
		if err := writeCgroup(d, "pids.max", strconv.FormatInt(gvisorPids(tasks), 10)); err != nil {
			return err
		}
	}
	if res.MemoryBytes > 0 {
		d, v2, err := dir("memory")
		if err != nil {
			return err
		}
		if err := setSentryMemory(d, v2, res.MemoryBytes, tasks); err != nil {
			return err
		}
	}
	return nil
}

// sizeSentryCgroup sizes a gVisor sandbox's host memory cgroup once runsc
// has booted it. runsc set the limit to the sandbox's size from
// config.json, and gave the guest that as its memory (MemTotal) at boot;
// the host limit now goes up by the Sentry's own overhead
// (gvisorHostMemory), so the guest's OOM killer (pt-agent's MemoryGuard)
// acts before the host would have to end the whole sandbox.
func (r *Runtime) sizeSentryCgroup(spec runtime.Spec) error {
	if !r.gvisor || spec.Resources.MemoryBytes <= 0 || spec.CgroupPath == "" {
		return nil
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	d, v2, ok := cgroupDir(mounts, "memory", spec.CgroupPath)
	if !ok {
		return fmt.Errorf("cgroup %s has no memory controller", spec.CgroupPath)
	}
	return setSentryMemory(d, v2, spec.Resources.MemoryBytes, gvisorTasks(spec.Resources.Pids, spec.Resources.MemoryBytes))
}

// setSentryMemory sets a gVisor sandbox's host memory cgroup for a sandbox
// of memBytes running at most tasks tasks. v1: the limit is
// gvisorHostMemory and the kernel's OOM killer is off for the cgroup
// (memory.oom_control): a sandbox that reaches the limit stalls, and the
// host's OOM watcher lets the allocation that stalled it finish (up to
// gvisorStallRoom) while the guard inside kills the process that made it,
// instead of the kernel killing the Sentry and with it every process. v2
// has no such switch: memory.high at gvisorHostMemory throttles, and
// memory.max the stall room above it is where the kernel ends the sandbox,
// as a whole (memory.oom.group): the kernel's OOM killer alone picks the
// process charged the most, one of the Sentry's systrap stubs, and a
// sandbox that lost a stub neither runs nor exits (see endStalled).
func setSentryMemory(dir string, v2 bool, memBytes, tasks int64) error {
	limit := gvisorHostMemory(memBytes, tasks)
	if v2 {
		if err := writeCgroup(dir, "memory.max", strconv.FormatInt(limit+gvisorStallRoom(memBytes), 10)); err != nil {
			return err
		}
		if err := writeCgroup(dir, "memory.high", strconv.FormatInt(limit, 10)); err != nil {
			return err
		}
		if err := writeCgroup(dir, "memory.oom.group", "1"); err != nil {
			return err
		}
		return ignoreMissing(writeCgroup(dir, "memory.swap.max", "0"))
	}
	if err := setMemoryLimit(dir, false, limit); err != nil {
		return err
	}
	return writeCgroup(dir, "memory.oom_control", "1")
}

// setMemoryLimit sets memory and memory+swap to limit (v1: memsw must stay
// at least the memory limit, so the order depends on the direction; v2:
// no swap).
func setMemoryLimit(dir string, v2 bool, limit int64) error {
	v := strconv.FormatInt(limit, 10)
	if v2 {
		if err := writeCgroup(dir, "memory.max", v); err != nil {
			return err
		}
		return ignoreMissing(writeCgroup(dir, "memory.swap.max", "0"))
	}
	cur, _ := os.ReadFile(filepath.Join(dir, "memory.limit_in_bytes"))
	old, _ := strconv.ParseInt(strings.TrimSpace(string(cur)), 10, 64)
	mem := func() error { return writeCgroup(dir, "memory.limit_in_bytes", v) }
	memsw := func() error { return ignoreMissing(writeCgroup(dir, "memory.memsw.limit_in_bytes", v)) }
	if limit > old {
		if err := memsw(); err != nil {
			return err
		}
		return mem()
	}
	if err := mem(); err != nil {
		return err
	}
	return memsw()
}

// writeCgroup writes one cgroup file; EBUSY (a memory limit below usage
// the kernel cannot reclaim) wraps sandbox.ErrConflict, anything else
// sandbox.ErrUnavailable.
func writeCgroup(dir, file, value string) error {
	err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EBUSY):
		return fmt.Errorf("%s = %s: the sandbox uses more than that: %w", file, value, sandbox.ErrConflict)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: %w", file, err)
	default:
		return fmt.Errorf("%s = %s: %w: %w", file, value, err, sandbox.ErrUnavailable)
	}
}

func ignoreMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// cgroupMemoryLimit reads a running container's memory limit from its host
// cgroup; 0 when unknown or unlimited.
func cgroupMemoryLimit(bundle string) uint64 {
	path, err := bundleCgroupPath(bundle)
	if err != nil {
		return 0
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return 0
	}
	d, v2, ok := cgroupDir(mounts, "memory", path)
	if !ok {
		return 0
	}
	file := "memory.limit_in_bytes"
	if v2 {
		file = "memory.max"
	}
	b, err := os.ReadFile(filepath.Join(d, file))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n >= 1<<62 {
		return 0
	}
	return n
}

// prepareCpusetParents creates the v1 cpuset ancestors of cgroup path
// that are missing and fills their empty cpuset.cpus and cpuset.mems from
// their own parent, as runc does. runsc does not: when it is the first to
// create the ancestors, the sandbox's cgroup cannot get a cpuset ("write
// cpuset.cpus: permission denied"). Without a v1 cpuset hierarchy it does
// nothing (v2 cpusets inherit).
func prepareCpusetParents(path string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var root string
	for _, m := range mounts {
		if !m.v2 && slices.Contains(m.controllers, "cpuset") {
			root = m.dir
		}
	}
	if root == "" {
		return nil
	}
	parts := strings.Split(strings.Trim(filepath.Clean(path), "/"), "/")
	dir := root
	for _, p := range parts[:max(len(parts)-1, 0)] {
		parent := dir
		dir = filepath.Join(dir, p)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cpuset %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			cur, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				return fmt.Errorf("cpuset %s: %w", dir, err)
			}
			if strings.TrimSpace(string(cur)) != "" {
				continue
			}
			v, err := os.ReadFile(filepath.Join(parent, f))
			if err != nil {
				return fmt.Errorf("cpuset %s: %w", parent, err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), v, 0); err != nil {
				return fmt.Errorf("cpuset %s: %s: %w", dir, f, err)
			}
		}
	}
	return nil
}

// killCgroupAndWait ends (SIGKILL) every process left in the memory cgroup
// config.json in bundle names and waits (at most timeout) until none is
// left. After `runsc checkpoint` has returned, the image is complete and
// the sandbox is stopped, but its Sentry takes about a second to exit on
// its own, and `runsc delete` meanwhile finds the cgroup busy and retries
// its removal with a backoff; delete would kill it anyway.
//
// It reports whether the cgroup was seen empty (or gone).
func killCgroupAndWait(ctx context.Context, bundle string, timeout time.Duration) bool {
	path, err := bundleCgroupPath(bundle)
	if err != nil {
		return false
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return false
	}
	d, _, ok := cgroupDir(mounts, "memory", path)
	if !ok {
		return false
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if errors.Is(err, fs.ErrNotExist) || err == nil && len(strings.TrimSpace(string(b))) == 0 {
			return true
		}
		if err != nil {
			return false
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// enableOOMKiller turns the kernel's OOM killer back on for the memory
// cgroup of the container in bundle (v1; nothing to do on v2).
func enableOOMKiller(bundle string) {
	path, err := bundleCgroupPath(bundle)
	if err != nil {
		return
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return
	}
	if d, v2, ok := cgroupDir(mounts, "memory", path); ok && !v2 {
		writeCgroup(d, "memory.oom_control", "0")
	}
}
