// Package runtimetest is the conformance suite every runtime.Runtime
// implementation runs (Run), plus the small harness it is built on, which
// implementation-specific tests may reuse (NewSpec, Start). Containers run
// a busybox rootfs whose init is a /bin/sh -c script; the script writes its
// findings into files on the rootfs, which the host then reads.
package runtimetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/runtime/cgmount"
	"github.com/platinum-dev/platinum/internal/template"
	"github.com/platinum-dev/platinum/internal/testenv"
)

// waitTimeout bounds every wait for a container to reach a state; it is a
// failure bound for a wedged runtime, not a performance assertion.
const waitTimeout = 30 * time.Second

// Defaults every NewSpec starts from: small but far from the limits a
// script hits by accident.
var defaultResources = runtime.Resources{CPU: 1, MemoryBytes: 128 << 20, Pids: 128}

// Container is a container started by Start; it is deleted (and its cgroup
// removed) when the test ends.
type Container struct {
	// Spec is what the container was started with.
	Spec runtime.Spec
	rt   runtime.Runtime
}

// ID returns the container ID.
func (c *Container) ID() string { return c.Spec.ID }

// NewSpec returns a Spec for a fresh container whose init runs script with
// /bin/sh -c on its own busybox rootfs, with a unique ID, hostname and
// cgroup path. The rootfs and bundle live in t.TempDir().
func NewSpec(t testing.TB, script string) runtime.Spec {
	t.Helper()
	testenv.RequiresRoot(t)
	id := "rtt-" + randHex(t, 6)
	dir := t.TempDir()
	rootfs, bundle := filepath.Join(dir, "rootfs"), filepath.Join(dir, "bundle")
	if err := template.BuildBusybox(context.Background(), rootfs); err != nil {
		t.Fatalf("busybox rootfs: %v", err)
	}
	if err := os.Mkdir(bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	return runtime.Spec{
		ID:        id,
		BundleDir: bundle,
		RootFS:    rootfs,
		Hostname:  "h-" + id,
		// One level, so deleting the container removes the whole path.
		CgroupPath: "/platinum-" + id,
		Resources:  defaultResources,
		Args:       []string{"/bin/sh", "-c", script},
		Env:        []string{"PATH=/bin", "HOME=/root"},
		Cwd:        "/",
	}
}

// Start runs spec and registers its deletion (and the removal of any
// cgroup directory left behind) with t.Cleanup.
func Start(t testing.TB, rt runtime.Runtime, spec runtime.Spec) *Container {
	t.Helper()
	t.Cleanup(func() { cleanup(t, rt, spec) })
	if err := rt.Run(context.Background(), spec); err != nil {
		t.Fatalf("Run(%s): %v", spec.ID, err)
	}
	return &Container{Spec: spec, rt: rt}
}

func cleanup(t testing.TB, rt runtime.Runtime, spec runtime.Spec) {
	if err := rt.Delete(context.Background(), spec.ID); err != nil {
		t.Errorf("cleanup: Delete(%s): %v", spec.ID, err)
	}
	for _, d := range cgroupDirs(spec.CgroupPath) {
		// Deepest first; a runtime that removed them leaves nothing to do.
		removeCgroupTree(d)
	}
}

// File returns the content of a file in the container's rootfs and
// whether it exists.
func (c *Container) File(name string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(c.Spec.RootFS, name))
	if err != nil {
		return "", false
	}
	return string(b), true
}

// WaitFile waits until the script creates name in its rootfs and returns
// its content. Scripts create a marker last (": > /done") and the host
// waits for the marker, so results are complete when read.
func (c *Container) WaitFile(t testing.TB, name string) string {
	t.Helper()
	var content string
	waitFor(t, "file "+name+" in "+c.ID(), func() bool {
		var ok bool
		content, ok = c.File(name)
		return ok
	})
	return content
}

// Results waits for /done and then parses /results, whose lines are
// "key=value" (later keys win).
func (c *Container) Results(t testing.TB) map[string]string {
	t.Helper()
	c.WaitFile(t, "done")
	raw, _ := c.File("results")
	out := map[string]string{}
	for _, line := range strings.Split(raw, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = v
		}
	}
	return out
}

// WantResults checks that Results holds each key of want with its value;
// other keys may be there too.
func (c *Container) WantResults(t testing.TB, want map[string]string) {
	t.Helper()
	got := c.Results(t)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (all results: %v)", k, got[k], v, got)
		}
	}
}

// State returns the container's state, failing the test on error.
func (c *Container) State(t testing.TB) runtime.State {
	t.Helper()
	st, err := c.rt.State(context.Background(), c.ID())
	if err != nil {
		t.Fatalf("State(%s): %v", c.ID(), err)
	}
	return st
}

// WaitStatus waits until the container reports status.
func (c *Container) WaitStatus(t testing.TB, status runtime.Status) runtime.State {
	t.Helper()
	var st runtime.State
	waitFor(t, fmt.Sprintf("%s to be %s", c.ID(), status), func() bool {
		var err error
		st, err = c.rt.State(context.Background(), c.ID())
		return err == nil && st.Status == status
	})
	return st
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func randHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// cgroupMount is one mounted cgroup hierarchy of the host.
type cgroupMount struct {
	dir         string
	v2          bool
	controllers []string
}

// cgroupMounts lists the cgroup hierarchies mounted in our mount namespace
// (v1 controllers and the v2 unified tree).
func cgroupMounts() []cgroupMount {
	ms, _ := cgmount.List()
	var out []cgroupMount
	for _, m := range ms {
		if m.Root != "/" {
			continue
		}
		out = append(out, cgroupMount{dir: m.Dir, v2: m.V2, controllers: m.Options})
	}
	return out
}

// cgroupDirs returns the host directories a cgroup path maps to in every
// hierarchy, existing or not.
func cgroupDirs(path string) []string {
	var out []string
	for _, m := range cgroupMounts() {
		out = append(out, filepath.Join(m.dir, path))
	}
	return out
}

// existingCgroupDirs returns the directories of path that still exist.
func existingCgroupDirs(path string) []string {
	var out []string
	for _, d := range cgroupDirs(path) {
		if _, err := os.Stat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// removeCgroupTree removes a cgroup directory and its children, deepest
// first (cgroup directories are removed with rmdir, never unlink).
func removeCgroupTree(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			removeCgroupTree(filepath.Join(dir, e.Name()))
		}
	}
	os.Remove(dir)
}

// hostCgroupFile reads a cgroup file of pid's cgroup from the host side:
// v1File in the v1 hierarchy holding controller, else v2File in the
// unified hierarchy. Reading from the host does not depend on what the
// container can see.
func hostCgroupFile(pid int, controller, v1File, v2File string) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	var v1Path, v2Path string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2Path = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				v1Path = parts[2]
			}
		}
	}
	for _, m := range cgroupMounts() {
		if v1Path != "" && !m.v2 && slices.Contains(m.controllers, controller) {
			return readTrim(filepath.Join(m.dir, v1Path, v1File))
		}
	}
	for _, m := range cgroupMounts() {
		if v1Path == "" && m.v2 && v2Path != "" {
			return readTrim(filepath.Join(m.dir, v2Path, v2File))
		}
	}
	return "", fmt.Errorf("pid %d: no cgroup hierarchy with %s", pid, controller)
}

func readTrim(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

// memoryLimit reads pid's memory limit from the host (memory.limit_in_bytes
// on v1, memory.max on v2).
func memoryLimit(pid int) (int64, error) {
	s, err := hostCgroupFile(pid, "memory", "memory.limit_in_bytes", "memory.max")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// pidsLimit reads pids.max.
func pidsLimit(pid int) (string, error) {
	return hostCgroupFile(pid, "pids", "pids.max", "pids.max")
}

// cpuQuota returns the CFS quota in µs (cpu.cfs_quota_us on v1, the first
// field of cpu.max on v2).
func cpuQuota(pid int) (string, error) {
	s, err := hostCgroupFile(pid, "cpu", "cpu.cfs_quota_us", "cpu.max")
	if err != nil {
		return "", err
	}
	f := strings.Fields(s)
	if len(f) == 0 {
		return "", errors.New("empty cpu quota")
	}
	return f[0], nil
}

// waitDoneOrStopped waits until the script creates name or the container
// stops, and reports whether it stopped first.
func (c *Container) waitDoneOrStopped(t testing.TB, name string) (stopped bool) {
	t.Helper()
	waitFor(t, fmt.Sprintf("file %s in %s or the container to stop", name, c.ID()), func() bool {
		if _, ok := c.File(name); ok {
			return true
		}
		st, err := c.rt.State(context.Background(), c.ID())
		stopped = err == nil && st.Status == runtime.StatusStopped
		return stopped
	})
	return stopped
}

// limitHit reports whether the cgroup at path has hit its limit of
// controller ("memory" or "pids"), from the host side: memory.failcnt or
// the OOM kill count on v1, memory.events on v2, pids.events on both.
func limitHit(path, controller string) (bool, error) {
	var v2dir string
	for _, m := range cgroupMounts() {
		dir := filepath.Join(m.dir, path)
		if m.v2 {
			v2dir = dir
			continue
		}
		if !slices.Contains(m.controllers, controller) {
			continue
		}
		if controller == "memory" {
			// Kernels differ in which counter moves: failcnt, or only the
			// OOM kill count.
			s, err := readTrim(filepath.Join(dir, "memory.failcnt"))
			if err != nil {
				return false, err
			}
			if s != "0" {
				return true, nil
			}
			return eventCount(filepath.Join(dir, "memory.oom_control"), "oom_kill")
		}
		return eventCount(filepath.Join(dir, "pids.events"), "max")
	}
	if v2dir == "" {
		return false, fmt.Errorf("no cgroup hierarchy with %s", controller)
	}
	if controller == "memory" {
		if hit, err := eventCount(filepath.Join(v2dir, "memory.events"), "max"); err != nil || hit {
			return hit, err
		}
		return eventCount(filepath.Join(v2dir, "memory.events"), "oom_kill")
	}
	return eventCount(filepath.Join(v2dir, "pids.events"), "max")
}

// eventCount reports whether key's counter in a cgroup events file
// ("max 3\n...") is above zero.
func eventCount(path, key string) (bool, error) {
	s, err := readTrim(path)
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			return f[1] != "0", nil
		}
	}
	return false, fmt.Errorf("%s: no %q counter", path, key)
}
