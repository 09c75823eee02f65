package oci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	LimitsStopSandbox: true,
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
