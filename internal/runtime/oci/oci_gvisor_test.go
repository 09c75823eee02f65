package oci

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/runtime/runtimetest"
	"github.com/platinum-dev/platinum/internal/testenv"
)

// newGVisor returns the gvisor class as ptd configures it (GVisorConfig),
// through NewRuntime so it carries runtime.Checkpointer. It requires runsc:
// under CI a missing runsc fails (scripts/setup.sh installs it).
func newGVisor(t *testing.T) runtime.Runtime {
	t.Helper()
	testenv.RequiresRoot(t)
	testenv.RequiresCommand(t, "runsc")
	rt, err := NewRuntime(GVisorConfig(filepath.Join(t.TempDir(), "runsc-state")), nil)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// gvisorSemantics are the places where gVisor legitimately differs from
// runc (see GVisorConfig); nothing about isolation is relaxed.
var gvisorSemantics = runtimetest.Options{
	HostPidsLimit: func(pids int64) int64 { return gvisorPids(gvisorTasks(pids, 0)) },
	// The conformance specs' memory and pids give the host cgroup the
	// Sentry's overhead on top (memory.limit_in_bytes on v1; on v2 that is
	// memory.high, and memory.max adds the stall room).
	HostMemoryLimit: func(mem, pids int64) int64 {
		limit := gvisorHostMemory(mem, gvisorTasks(pids, mem))
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
			limit += gvisorStallRoom(mem)
		}
		return limit
	},
	LimitsStopSandbox:    true,
	GuestKeepsBootMemory: true,
}

func TestGVisorConformance(t *testing.T) {
	runtimetest.RunWith(t, func(t *testing.T) runtime.Runtime { return newGVisor(t) }, gvisorSemantics)
}

func TestGVisorClass(t *testing.T) {
	rt := newGVisor(t)
	if got := rt.Name(); got != "gvisor" {
		t.Errorf("Name() = %q, want gvisor", got)
	}
	if ok, reason := Supports(rt); !ok {
		t.Errorf("Supports(gvisor) = false (%s), want true", reason)
	}
	if _, ok := rt.(*CheckpointRuntime); !ok {
		t.Errorf("NewRuntime(GVisorConfig) = %T, want *CheckpointRuntime", rt)
	}
}

// TestGVisorHostNetworkCannotCheckpoint checks that NewRuntime does not
// claim checkpoints with the one network mode runsc cannot save.
func TestGVisorHostNetworkCannotCheckpoint(t *testing.T) {
	testenv.RequiresRoot(t)
	testenv.RequiresCommand(t, "runsc")
	cfg := GVisorConfig(filepath.Join(t.TempDir(), "runsc-state"))
	cfg.GlobalArgs = append(cfg.GlobalArgs, "--network=host")
	rt, err := NewRuntime(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, reason := Supports(rt); ok || !strings.Contains(reason, "network=host") {
		t.Errorf("Supports = %v, %q; want false naming --network=host", ok, reason)
	}
}

// TestGVisorSeccomp checks that --oci-seccomp applies our profile inside
// the sandbox, so both classes refuse the same syscalls.
func TestGVisorSeccomp(t *testing.T) {
	rt := newGVisor(t)
	c := runtimetest.Start(t, rt, runtimetest.NewSpec(t, `
		exec > /results 2>/dev/null
		unshare -U true; echo "userns=$?"
		dmesg > /dev/null; echo "syslog=$?"
		echo "seccomp=$(awk '/^Seccomp:/ { print $2 }' /proc/self/status)"
		: > /done
		exec sleep 1000000`))
	c.WantResults(t, map[string]string{"userns": "1", "syslog": "1", "seccomp": "2"})
}

// TestGVisorRunErrorQuotesLog checks that a failing start reports runsc's
// own message (its log has JSON entries without newlines between them).
func TestGVisorRunErrorQuotesLog(t *testing.T) {
	testRunErrorQuotesLog(t, newGVisor(t), "runsc")
}

// TestGVisorGuardPoked: a gVisor sandbox's OOM watcher pokes its PID 1
// (SIGWINCH; pt-agent's memory guard, PT_MEMORY_GUARD=poked) once the
// sandbox's memory on the host passes half its size, and not before: the
// guard inside relies on that poke instead of a fast idle poll. The guest
// starts growing on SIGUSR1, not on a file the host writes into its root:
// gVisor owns the root filesystem (exclusive file access) and need not see
// such a write (runsc of 2026-09 never does).
func TestGVisorGuardPoked(t *testing.T) {
	rt := newGVisor(t)
	spec := runtimetest.NewSpec(t, `
		trap ': > /poked' WINCH
		trap 'go=1' USR1
		: > /ready
		while [ -z "$go" ]; do sleep 0.05; done
		tail -c 90m /dev/zero &
		while :; do sleep 0.05; done`)
	spec.Resources.MemoryBytes = 128 << 20
	c := runtimetest.Start(t, rt, spec)
	c.WaitFile(t, "ready")
	time.Sleep(time.Second)
	if _, ok := c.File("poked"); ok {
		t.Fatal("poked while the sandbox's memory was low")
	}
	if err := rt.Kill(context.Background(), c.ID(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	c.WaitFile(t, "poked")
}

// TestGVisorGuardPokedAtBoot: a sandbox whose memory passes half its size
// while its watch is still registering the guard's ladder (which Run no
// longer waits for) is poked all the same: the watch's first look at the
// usage, once the ladder is in place, sees it.
func TestGVisorGuardPokedAtBoot(t *testing.T) {
	rt := newGVisor(t)
	spec := runtimetest.NewSpec(t, `
		trap ': > /poked' WINCH
		tail -c 90m /dev/zero &
		while :; do sleep 0.05; done`)
	spec.Resources.MemoryBytes = 128 << 20
	c := runtimetest.Start(t, rt, spec)
	c.WaitFile(t, "poked")
}

// TestGuardRung: the ladder starts at half the sandbox's size and climbs
// every eighth (at least 8 MiB).
func TestGuardRung(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		usage, mem int64
		want       int
	}{
		{0, 256 * mib, -1},
		{128*mib - 1, 256 * mib, -1},
		{128 * mib, 256 * mib, 0},
		{160*mib - 1, 256 * mib, 0},
		{160 * mib, 256 * mib, 1},
		{600 * mib, 256 * mib, 14},
		{32 * mib, 32 * mib, 2}, // 8 MiB steps from 16 MiB
	} {
		if got := guardRung(tc.usage, tc.mem); got != tc.want {
			t.Errorf("guardRung(%d MiB, %d MiB) = %d, want %d", tc.usage/mib, tc.mem/mib, got, tc.want)
		}
	}
}
