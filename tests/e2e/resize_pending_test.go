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
// new size even though the stop froze the sandbox's memory at the old one.
func TestPendingResizeBootsCold(t *testing.T) {
	c := newClient(t)
	for round := 0; round < 3; round++ {
		id := c.create(map[string]any{"template": "busybox", "runtime": "runc", "cpu": 1, "ram_mb": 256})
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
		_, cgroup := hostResources(t, id)
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", cgroup, "memory.limit_in_bytes"))
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(512<<20) {
			t.Errorf("round %d: memory limit after the start %q %v, want %d", round, b, err, 512<<20)
		}
		c.do("DELETE", "/v1/sandboxes/"+id, nil)
	}
}
