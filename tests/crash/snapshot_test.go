package crash

import (
	"testing"
	"time"
)

// TestKillDuringRestoreAndFork kills ptd while a restore in place, a fork
// and a backup are in flight: after the restart the restored sandbox runs
// on the snapshot's files, every fork runs with its own hostname, the
// backup ends complete or failed (never stuck), and nothing stays in a
// transitional state.
func TestKillDuringRestoreAndFork(t *testing.T) {
	d, a := startDaemon(t)
	for round, delay := range []time.Duration{0, 10 * time.Millisecond, 50 * time.Millisecond, 150 * time.Millisecond} {
		st, m := a.do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": "busybox", "disk_gb": 1})
		if st != 201 {
			t.Fatalf("create: %d %v", st, m)
		}
		id := m["id"].(string)
		a.sh(id, "echo snapshot > /root/v")
		st, snap := a.do("POST", "/v1/sandboxes/"+id+"/snapshots", nil)
		if st != 201 {
			t.Fatalf("snapshot: %d %v", st, snap)
		}
		a.sh(id, "echo later > /root/v")
		st, m = a.do("POST", "/v1/sandboxes/"+id+"/fork", map[string]any{"count": 2})
		if st != 201 {
			t.Fatalf("fork: %d %v", st, m)
		}
		var forks []string
		for _, f := range m["sandboxes"].([]any) {
			forks = append(forks, f.(map[string]any)["id"].(string))
		}
		_, bk := a.do("POST", "/v1/sandboxes/"+id+"/backups", nil)
		a.do("POST", "/v1/sandboxes/"+id+"/restore", map[string]any{"snapshot_id": snap["id"]})
		time.Sleep(delay)
		d.Kill()
		if err := d.Restart(); err != nil {
			t.Fatalf("round %d: restart: %v", round, err)
		}

		a.waitState(id, "running", 90*time.Second)
		if out := a.sh(id, "cat /root/v"); out != "snapshot\n" {
			t.Errorf("round %d: after a restore interrupted by a crash: %q, want the snapshot's", round, out)
		}
		for _, f := range forks {
			a.waitState(f, "running", 90*time.Second)
			if out := a.sh(f, "hostname; cat /etc/hostname; cat /root/v"); out != f+"\n"+f+"\nlater\n" {
				t.Errorf("round %d: fork %s after the crash: %q", round, f, out)
			}
		}
		if bid, ok := bk["id"].(string); ok {
			deadline := time.Now().Add(2 * time.Minute)
			for {
				_, b := a.do("GET", "/v1/snapshots/"+bid, nil)
				if b["state"] == "ready" || b["state"] == "failed" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("round %d: backup %s stuck %v", round, bid, b["state"])
				}
				time.Sleep(100 * time.Millisecond)
			}
			a.do("DELETE", "/v1/snapshots/"+bid, nil)
		}
		for _, f := range forks {
			a.do("DELETE", "/v1/sandboxes/"+f, nil)
		}
		a.do("DELETE", "/v1/snapshots/"+snap["id"].(string), nil)
		a.do("DELETE", "/v1/sandboxes/"+id, nil)
	}
}
