package oci

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/runtime/runtimetest"
)

// TestRuncOOMReported: a process of a runc container killed by its
// cgroup's OOM killer is reported to the runtime's OnOOM sink as a kill
// of one process (not of the sandbox), and the container runs on.
func TestRuncOOMReported(t *testing.T) {
	r := newRunc(t)
	kills := make(chan OOMKill, 8)
	r.OnOOM(func(k OOMKill) { kills <- k })
	spec := runtimetest.NewSpec(t, `
		: > /ready
		while [ ! -e /go ]; do sleep 0.05; done
		dd if=/dev/zero of=/dev/null bs=200M count=1
		echo "dd=$?" > /results
		: > /done
		sleep 1000000`)
	spec.Resources.MemoryBytes = 48 << 20
	c := runtimetest.Start(t, r, spec)
	c.WaitFile(t, "ready")
	if err := os.WriteFile(filepath.Join(spec.RootFS, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.WaitFile(t, "done")
	select {
	case k := <-kills:
		if k.ID != spec.ID || k.Count < 1 || k.Sandbox {
			t.Errorf("OOM report %+v, want one process of %s", k, spec.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no OOM report 10 s after the kill")
	}
}
