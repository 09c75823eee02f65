package crash

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWarmStopSurvivesRestartThenEndsDiskOnly: a warm (frozen) stop of a
// runc sandbox outlives a SIGKILL of ptd — the start after the restart
// thaws it with its processes intact — and once the warm window (2 s
// here) passes, the frozen sandbox is stopped disk-only: the next start
// is a cold boot on the same disk that says so (restore disk_only,
// ram_restored false, metadata.last_start, a start_ram_not_restored event),
// as it is after a host restart drops the frozen sandbox.
func TestWarmStopSurvivesRestartThenEndsDiskOnly(t *testing.T) {
	d, a := startDaemon(t, "--warm-window", "2s", "--timer-interval", "200ms")
	_, hosts := a.do("GET", "/v1/hosts", nil)
	for _, h := range hosts["rows"].([]any) {
		for _, c := range h.(map[string]any)["runtime_classes"].([]any) {
			if cl := c.(map[string]any); cl["name"] == "runc" && cl["stop_keeps_memory"] != "freeze" {
				t.Skipf("runc keeps memory by %v here, not by a warm freeze", cl["stop_keeps_memory"])
			}
		}
	}
	st, m := a.do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": "busybox", "disk_gb": 1, "runtime": "runc"})
	if st != 201 || m["state"] != "running" {
		t.Fatalf("create: %d %v", st, m)
	}
	id := m["id"].(string)
	a.sh(id, `echo kept > /root/file; (i=0; while true; do i=$((i+1)); echo $i > /root/count.new; mv /root/count.new /root/count; sleep 0.05; done) </dev/null >/dev/null 2>&1 &`)
	count := func() int {
		t.Helper()
		n, err := strconv.Atoi(strings.TrimSpace(a.sh(id, "cat /root/count")))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	counting := func() bool {
		before := count()
		time.Sleep(300 * time.Millisecond)
		return count() > before
	}
	for i := 0; !counting(); i++ {
		if i == 20 {
			t.Fatal("the counter never started")
		}
	}
	start := func() map[string]any {
		t.Helper()
		st, m := a.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running&wait_timeout_ms=120000", nil)
		if st != 200 || m["state"] != "running" {
			t.Fatalf("start: %d %v", st, m)
		}
		return m
	}

	// Warm stop, then ptd dies and comes back inside the window.
	if st, m := a.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); st != 200 {
		t.Fatalf("stop: %d %v", st, m)
	}
	d.Kill()
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
	if m := start(); m["restore"] != "memory" || m["ram_restored"] != true {
		t.Fatalf("start inside the warm window after a ptd restart: %v", m)
	}
	if !counting() {
		t.Error("the counter stopped counting across a warm stop and a ptd restart")
	}

	// Past the window: stopped disk-only by the timer.
	if st, m := a.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); st != 200 {
		t.Fatalf("stop: %d %v", st, m)
	}
	ended := false
	for deadline := time.Now().Add(2 * time.Minute); !ended && time.Now().Before(deadline); {
		for _, line := range strings.Split(d.Log(), "\n") {
			if strings.Contains(line, "warm window over") && strings.Contains(line, id) {
				ended = true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !ended {
		t.Fatal("the warm window never ended")
	}
	m = start()
	md, _ := m["metadata"].(map[string]any)
	if m["restore"] != "disk_only" || m["ram_restored"] != false || !strings.Contains(md["last_start"].(string), `"restore":"disk_only"`) {
		t.Fatalf("start after the warm window: %v", m)
	}
	if out := a.sh(id, "cat /root/file"); out != "kept\n" {
		t.Errorf("disk after a disk-only start: %q", out)
	}
	if counting() {
		t.Error("a process survived a disk-only stop")
	}
	_, ev := a.do("GET", "/v1/events?format=json&type=start_ram_not_restored&sandbox_id="+id, nil)
	if rows, _ := ev["rows"].([]any); len(rows) == 0 {
		t.Error("no start_ram_not_restored event for the disk-only start")
	}

	// A host restart loses the RAM of a warm stop: the container is gone
	// when ptd comes back, and the start is a cold boot from the same disk.
	if st, m := a.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); st != 200 {
		t.Fatalf("stop: %d %v", st, m)
	}
	d.Kill()
	if out, err := exec.Command("runc", "--root", filepath.Join(d.DataDir, "runtime"), "delete", "--force", id).CombinedOutput(); err != nil {
		t.Fatalf("drop the frozen container as a reboot would: %v %s", err, out)
	}
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
	if m := start(); m["restore"] != "disk_only" || m["ram_restored"] != false {
		t.Fatalf("start after the host lost the frozen sandbox: %v", m)
	}
	if out := a.sh(id, "cat /root/file"); out != "kept\n" {
		t.Errorf("disk after a host restart: %q", out)
	}
	a.do("DELETE", "/v1/sandboxes/"+id, nil)
}
