package crash

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A ptd killed while giving a create a spare disk (the image renamed to the
// sandbox's, still mounted as a spare) restarts, finishes the create on
// that disk, and leaves no spare of the dead process mounted.
func TestKillWhileTakingSpareDisk(t *testing.T) {
	d, a := startDaemon(t)
	armCrash(t, d, "disk.spare.renamed")
	// The first create of a size takes no spare (none of 1 GB yet) and
	// has spares of it made for the next ones.
	st, m := a.do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": "busybox", "disk_gb": 1})
	if st != 201 {
		t.Fatalf("create: %d %v", st, m)
	}
	waitSpare(t, d.DataDir, "1g-")
	// The create stores the sandbox and answers while a background task
	// takes the spare, so ptd may die before or after the answer is sent:
	// the sandbox is found by its metadata either way.
	st, m, _ = a.try("POST", "/v1/sandboxes", map[string]any{"template": "busybox", "disk_gb": 1, "metadata": map[string]string{"crash": "spare"}}, nil)
	crashed(t, d, "disk.spare.renamed")
	if st != 0 && st != 201 {
		t.Fatalf("create before the crash: %d %v", st, m)
	}
	rows := a.tagged("crash", "spare")
	if len(rows) != 1 {
		t.Fatalf("sandboxes created before the crash: %v", rows)
	}
	id := rows[0].(map[string]any)["id"].(string)
	if st == 201 && m["id"] != id {
		t.Fatalf("the create answered %v, the list holds %s", m["id"], id)
	}
	a.waitState(id, "running", 60*time.Second)
	a.sh(id, "echo kept > /root/f")
	if out := a.sh(id, "cat /root/f; df -k / | tail -1"); !strings.HasPrefix(out, "kept\n") {
		t.Fatalf("sandbox after the crash: %q", out)
	}
	// The restart unmounted the dead process's spare (now the sandbox's
	// image) before the start mounted it at its own place: one loop
	// device, one mount. Two would be one XFS mounted twice.
	out, err := exec.Command("losetup", "-a").CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v %s", err, out)
	}
	if n := strings.Count(string(out), "/images/"+id+".img"); n != 1 {
		t.Errorf("the sandbox's image is on %d loop devices, want 1:\n%s", n, out)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if !strings.Contains(string(mounts), filepath.Join(d.DataDir, "sandboxes", id, "disk")+" ") {
		t.Errorf("the sandbox's disk is not mounted at its own place")
	}
}

// waitSpare waits until a spare disk whose name starts with prefix is
// ready: mounted, with the dirs a spare is given made (the last step).
func waitSpare(t *testing.T, dataDir, prefix string) {
	t.Helper()
	dir := filepath.Join(dataDir, "disks", "pool", "spare-mnt")
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) {
				if _, err := os.Stat(filepath.Join(dir, e.Name(), "work")); err == nil {
					time.Sleep(50 * time.Millisecond) // listed right after its dirs
					return
				}
			}
		}
	}
	t.Fatalf("no spare disk %s* became ready", prefix)
}
