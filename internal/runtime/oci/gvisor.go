package oci

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/platinum-dev/platinum/internal/runtime"
)

// GVisorConfig returns the configuration of the gvisor runtime class: the
// same driver running runsc with state in root: scripts/setup.sh builds a
// pinned release of gVisor's go branch (2026-09); runsc 2024-07 (Debian
// bookworm-backports) still works.
//
// The flags, and why:
//   - --platform=systrap: the only fast platform here (ptrace is slow, KVM
//     is nested PVM and hangs).
//   - --network=sandbox: gVisor's own network stack, inside the network
//     namespace the host layer made (veth + address + default route). It is
//     what makes checkpoints possible: runsc refuses to checkpoint a sandbox
//     using the host's stack (--network=host). A Spec without NetNSPath runs
//     with --network=none (loopback only) instead.
//   - --overlay2=none: writes go to the root filesystem we mount (the
//     sandbox's disk), as with runc; runsc's default keeps them in memory.
//   - --oci-seccomp: apply our seccomp profile inside the sandbox too, so
//     both classes refuse the same syscalls.
//   - --net-disconnect-ok: a checkpoint resets established TCP connections
//     instead of failing ("endpoint cannot be saved in connected state");
//     listening sockets are kept. Without it any open connection, such as
//     the host's keep-alive connection to pt-agent, blocks checkpoints.
//
// Where gvisor differs from runc for the host layer:
//   - While a sandbox runs, gVisor owns the namespace's addresses and routes
//     (it removes them from the kernel's interface and serves them itself);
//     Delete puts them back. Code that reads a sandbox's address from its
//     namespace must not rely on it while the sandbox runs.
//   - Resources.Pids: the host cgroup also counts gVisor's own threads and
//     a host process per sandbox process, so the cgroup limit is scaled
//     (gvisorPids), above the task limit gVisor's own kernel enforces
//     (gvisorTasks), as its host memory limit is above the guest's memory
//     (gvisorHostMemory; the runsc scripts/setup.sh builds keeps the guest
//     within it, third_party/gvisor): a sandbox that reaches a host limit
//     is stopped as a whole.
//   - Update writes the sandbox's host cgroup (runsc has no update
//     command; see cgroup.go): the host enforces the new limits at once,
//     while gVisor's own view (/proc/meminfo, CPU count) keeps its boot
//     size. Stats report gVisor's own accounting.
//   - /tmp is bound to the root filesystem's /tmp (on disk, as with runc);
//     runsc would otherwise mount a tmpfs there.
//   - Checkpoint, with or without LeaveRunning, resets the sandbox's
//     established TCP connections (see --net-disconnect-ok): clients of
//     pt-agent must reconnect after a snapshot or fork.
//   - Restore under another ID (a fork) takes the new namespace's address,
//     but the kernel state in the image, hostname included, is the source's.
func GVisorConfig(root string) Config {
	return Config{
		Binary: "runsc",
		Root:   root,
		Class:  "gvisor",
		GlobalArgs: []string{
			"--platform=systrap",
			"--network=sandbox",
			"--overlay2=none",
			"--oci-seccomp",
			"--net-disconnect-ok",
		},
	}
}

// containerFlags are the global flags one container adds to run and
// restore: its network's and its GPUs'.
func (r *Runtime) containerFlags(spec runtime.Spec) []string {
	return append(r.networkFlags(spec), r.gpuFlags(spec)...)
}

// networkFlags returns per-container global flags: runsc's sandbox network
// needs a namespace to copy, so a Spec without one gets loopback only (the
// equivalent of runc's fresh, empty namespace).
func (r *Runtime) networkFlags(spec runtime.Spec) []string {
	if r.gvisor && spec.NetNSPath == "" {
		return []string{"--network=none"}
	}
	return nil
}

// gVisor's memory and tasks on the host, measured with systrap (2024-07)
// on this kernel: a guest process costs about 0.83 MiB of the host
// cgroup's memory (500 busybox sleeps: +416 MiB), of which 0.45 MiB is
// the guest's own anonymous memory (what its MemTotal accounts) and the
// rest the Sentry's (its task state, page tables, the systrap stub
// process); an idle sandbox's Sentry and gofer charge 15-30 MiB. A
// sandbox whose host cgroup is exactly its size is therefore ended as a
// whole (the host kills the Sentry) by a guest that fills its memory, or by
// enough processes that each use little.
const (
	// gvisorMemBase and gvisorMemPerTask size the host cgroup above the
	// sandbox's memory for the Sentry's own use (gvisorHostMemory).
	gvisorMemBase    = 64 << 20
	gvisorMemPerTask = 512 << 10
	// gvisorMinTasks is the task limit of the smallest sandboxes.
	gvisorMinTasks = 64
)

// gvisorTasks is a gVisor sandbox's task limit (processes and threads,
// RLIMIT_NPROC inside, see rlimits): the host's pids limit, but at most one
// task per MiB of the sandbox's memory (at least gvisorMinTasks), so that
// a fork bomb is refused inside (EAGAIN) while what its tasks cost the
// Sentry still fits the host cgroup. A 256 MB sandbox runs 256 tasks.
func gvisorTasks(pids, memBytes int64) int64 {
	if memBytes <= 0 {
		return pids
	}
	n := max(gvisorMinTasks, memBytes>>20)
	if pids > 0 {
		n = min(n, pids)
	}
	return n
}

// gvisorHostMemory is the host cgroup limit of a gVisor sandbox of
// memBytes running at most tasks tasks: its memory, which its guest sees
// as MemTotal and the guard inside (pt-agent's MemoryGuard) holds it to,
// plus the Sentry's own overhead. A 256 MB sandbox (256 tasks) gets 448 MiB.
func gvisorHostMemory(memBytes, tasks int64) int64 {
	return memBytes + gvisorMemBase + tasks*gvisorMemPerTask
}

// gvisorStallRoom is how far above gvisorHostMemory the host's OOM
// watcher may let a stalled gVisor sandbox grow (see internal/host's
// oom.go): the room a guest process the guard already killed may need to
// finish the one system call that asked for more memory than the sandbox
// has (its kill takes effect when the call returns). Past it the host's
// OOM killer ends the sandbox.
func gvisorStallRoom(memBytes int64) int64 { return max(memBytes, 256<<20) }

// Host tasks per sandbox process and for gVisor itself, measured with
// systrap (2024-07): a limit of 64 allowed 19 sandbox processes, 128
// allowed 51 and 256 allowed 113, and an idle sandbox has ≈25 host tasks.
const (
	gvisorTasksPerProcess = 2
	gvisorTasksOverhead   = 64
)

// gvisorPids converts a sandbox task limit into the host cgroup's, so the
// sandbox can run about that many tasks before the host limit stops it.
func gvisorPids(tasks int64) int64 {
	return tasks*gvisorTasksPerProcess + gvisorTasksOverhead
}

// runscVersionArgs returns globalArgs plus the flags this runsc needs
// that not every supported release has, found in `runsc flags`:
//   - --gofer-network-namespace=new: releases that have the flag (2025 and
//     later) by default start gofers in one empty network namespace pinned
//     by a bind mount at <root>/null-netns, which outlives every sandbox
//     and keeps the state root from being removed (EBUSY); and a runsc
//     started with /proc/sys/net hidden (startHidingNetSysctls) makes that
//     mount in its own mount namespace, where the next gofer never finds
//     it. A new empty namespace per gofer is what older releases do.
//
// A flag the caller already set is left as it is.
func runscVersionArgs(ctx context.Context, bin string, globalArgs []string) []string {
	out, err := exec.CommandContext(ctx, bin, "flags").CombinedOutput()
	if err != nil {
		return globalArgs
	}
	has := func(flag string) bool {
		return bytes.Contains(out, []byte("  -"+flag+" ")) || bytes.Contains(out, []byte("  -"+flag+"\n"))
	}
	set := func(flag string) bool {
		for _, a := range globalArgs {
			if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); name == flag {
				return true
			}
		}
		return false
	}
	args := slices.Clip(globalArgs)
	if has("gofer-network-namespace") && !set("gofer-network-namespace") {
		args = append(args, "--gofer-network-namespace=new")
	}
	return args
}

// runscCheckpointSupport returns why runsc with these flags cannot
// checkpoint, or nil.
func runscCheckpointSupport(globalArgs []string) error {
	network := "sandbox"
	for i, a := range globalArgs {
		switch {
		case strings.HasPrefix(a, "--network="), strings.HasPrefix(a, "-network="):
			network = a[strings.IndexByte(a, '=')+1:]
		case (a == "--network" || a == "-network") && i+1 < len(globalArgs):
			network = globalArgs[i+1]
		}
	}
	if network == "host" {
		return errors.New("runsc cannot checkpoint with --network=host")
	}
	return nil
}

// gvisorTmp is where runsc would mount its own tmpfs; binding the root
// filesystem's directory there keeps /tmp on disk, as with runc (snapshots
// and disk-only restarts keep it, and it does not eat sandbox memory).
const gvisorTmp = "/tmp"

// gvisorTmpMount returns the bind mount of the rootfs's /tmp, or false when
// the Spec mounts something at /tmp itself.
func gvisorTmpMount(s runtime.Spec) (specs.Mount, bool) {
	for _, m := range s.Mounts {
		if filepath.Clean(m.Destination) == gvisorTmp {
			return specs.Mount{}, false
		}
	}
	return specs.Mount{
		Destination: gvisorTmp, Type: "bind", Source: filepath.Join(s.RootFS, gvisorTmp),
		Options: []string{"rbind", "rprivate", "nosuid", "nodev"},
	}, true
}

// ensureTmpDir creates the rootfs's /tmp (mode 1777) when the bind mount
// needs it as a source and the image has none.
func ensureTmpDir(s runtime.Spec) error {
	m, ok := gvisorTmpMount(s)
	if !ok {
		return nil
	}
	if _, err := os.Lstat(m.Source); err == nil {
		return nil
	}
	if err := os.Mkdir(m.Source, 0o755); err != nil && !os.IsExist(err) {
		return fmt.Errorf("rootfs /tmp: %w", err)
	}
	if err := os.Chmod(m.Source, os.ModeSticky|0o777); err != nil {
		return fmt.Errorf("rootfs /tmp: %w", err)
	}
	return nil
}

// rlimits are the init process's limits, inherited by everything the
// sandbox runs: RLIMIT_NOFILE always and, for gVisor, RLIMIT_NPROC at the
// sandbox's task limit (gvisorTasks). gVisor's own kernel counts the sandbox's tasks
// against it (per user, as Linux does), so a fork bomb gets EAGAIN inside
// the sandbox and the sandbox lives on, as with runc's pids cgroup; the
// host cgroup's scaled limit (gvisorPids) stays as the backstop. runc
// shares the host kernel's per-user count, so it relies on the cgroup only.
func rlimits(r runtime.Resources, pl platform) []specs.POSIXRlimit {
	out := []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: pl.nofile, Soft: pl.nofile}}
	if n := gvisorTasks(r.Pids, r.MemoryBytes); pl.gvisor && n > 0 {
		out = append(out, specs.POSIXRlimit{Type: "RLIMIT_NPROC", Hard: uint64(n), Soft: uint64(n)})
	}
	return out
}

// Probe runs a throwaway sandbox (`runsc do /bin/true` with loopback-only
// networking and its own state dir) to tell whether this binary actually
// runs sandboxes here, not only answers --version: the platform may be
// missing (systrap needs a recent kernel, KVM a usable /dev/kvm). For runc
// it returns nil: runc runs wherever it is installed.
func (r *Runtime) Probe(ctx context.Context) error {
	if !r.gvisor {
		return nil
	}
	dir, err := os.MkdirTemp("", "pt-runsc-probe-")
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer os.RemoveAll(dir)
	args := []string{"--root", dir}
	for _, a := range r.cfg.GlobalArgs {
		if !strings.HasPrefix(a, "--network") {
			args = append(args, a)
		}
	}
	args = append(args, "--network=none", "do", "/bin/true")
	out, err := exec.CommandContext(ctx, r.binary, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s do /bin/true: %w: %s", r.cfg.Binary, err, strings.TrimSpace(lastError(out)))
	}
	return nil
}

// LiveResize reports whether a running container of rt changes the CPU
// count and memory size its processes see when Update changes its limits,
// and why not. runsc's sentry sizes its CPU count and memory at boot and
// has no update command: Update changes only the host's limits, so a
// gVisor guest keeps its boot size (nproc, MemTotal) until it boots again.
// Runtimes of other packages are taken to resize live.
func LiveResize(rt runtime.Runtime) (ok bool, reason string) {
	if r, isOCI := rt.(interface{ liveResize() (bool, string) }); isOCI {
		return r.liveResize()
	}
	return true, ""
}

// liveResize is LiveResize for this package's runtimes (a
// CheckpointRuntime has it through its *Runtime).
func (r *Runtime) liveResize() (bool, string) {
	if r.gvisor {
		return false, "gVisor fixes the CPU count and memory size its guest sees when it boots"
	}
	return true, ""
}

// ReleaseRoot unmounts what runsc may have left in the state root when no
// sandbox of it runs: the null-netns pin of its gofers' network namespace
// (runscVersionArgs), which would keep the root from being removed. It is
// a no-op for runc and when nothing is mounted there.
func (r *Runtime) ReleaseRoot() error {
	if !r.gvisor {
		return nil
	}
	err := unix.Unmount(filepath.Join(r.cfg.Root, "null-netns"), unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("oci: unmount null-netns: %w", err)
	}
	return nil
}
