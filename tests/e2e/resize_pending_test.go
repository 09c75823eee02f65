package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPendingResizeBootsCold: a resize sent while the stop is still
// running (202 pending) — or just after it (200 next_start), whichever the
// timing gives — is recorded at once, and the next start boots cold at the
// new size even though the stop kept the sandbox's memory at the old one
// (runc freezes it in RAM, gvisor checkpoints it to disk). On both classes
// the guest then sees the new size.
func TestPendingResizeBootsCold(t *testing.T) {
	eachRuntime(t, pendingResizeBootsCold)
}

func pendingResizeBootsCold(t *testing.T, c *client, class string) {
	for round := 0; round < 3; round++ {
		id := c.create(map[string]any{"template": "busybox", "runtime": class, "cpu": 1, "ram_mb": 256})
		c.mustSh(id, "sleep 4242 >/dev/null 2>&1 &")
		if r := c.do("POST", "/v1/sandboxes/"+id+"/stop", nil); r.Status != 200 {
			t.Fatalf("stop: %d %s", r.Status, r.Body)
		}
		r := c.do("POST", "/v1/sandboxes/"+id+"/resize", map[string]any{"ram_mb": 512})
		m := r.JSON()
		switch {
		case r.Status == 202 && m["applies_at"] == "pending":
			// The size is the record's at once.
			if g := c.do("GET", "/v1/sandboxes/"+id, nil).JSON(); g["ram_mb"] != 512.0 {
				t.Fatalf("record after a pending resize: %v", g)
			}
		case r.Status == 200 && m["applies_at"] == "next_start":
		default:
			t.Fatalf("resize during stop: %d %s", r.Status, r.Body)
		}
		if r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); r.Status != 200 {
			t.Fatalf("stop wait: %d %s", r.Status, r.Body)
		}
		r = c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil)
		if r.Status != 200 || r.JSON()["restore"] != "disk_only" || r.JSON()["ram_restored"] != false {
			t.Fatalf("start after the resize: %d %s (want a cold boot: the kept memory had the old size)", r.Status, r.Body)
		}
		// Cold: the old process is gone; the cgroup has the new limit.
		if out := c.mustSh(id, "ps -o args | grep -q '^sleep 4242' && echo alive || echo gone"); strings.TrimSpace(out) != "gone" {
			t.Errorf("round %d: the process from before the stop is %s", round, out)
		}
		if kb := memTotalKB(t, c, id); kb != 512*1024 {
			t.Errorf("round %d: MemTotal after the start %d kB, want %d", round, kb, 512*1024)
		}
		_, cgroup := hostResources(t, id)
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", cgroup, "memory.limit_in_bytes"))
		limit, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		// runc's limit is the size; gvisor's host cgroup adds the Sentry's
		// own overhead on top (see TestIsolationMemoryBomb).
		if err != nil || class == "runc" && limit != 512<<20 || class == "gvisor" && limit < 512<<20 {
			t.Errorf("round %d: memory limit after the start %q %v, want %d", round, b, err, 512<<20)
		}
		c.do("DELETE", "/v1/sandboxes/"+id, nil)
	}
}
