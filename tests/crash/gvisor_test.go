package crash

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/testenv"
)

// TestGVisorSurvivesPtdCrash kills ptd (SIGKILL) while one gVisor sandbox
// runs and another is stopped with its memory checkpointed. After the
// restart the running one keeps running untouched at its address (runsc
// owns its namespace's addresses, so the host adopts the recorded one
// rather than rebuilding it), a new sandbox gets another address, and the
// checkpointed one restores its memory on start.
func TestGVisorSurvivesPtdCrash(t *testing.T) {
	testenv.RequiresRoot(t)
	testenv.RequiresCommand(t, "runsc")
	d, a := startDaemon(t)
	create := func() (id, addr string) {
		st, m := a.do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": "busybox", "runtime": "gvisor", "disk_gb": 1})
		if st != 201 || m["state"] != "running" {
			t.Fatalf("create: %d %v", st, m)
		}
		id = m["id"].(string)
		return id, a.addr(id)
	}
	const sleeper = "sleep 100000 </dev/null >/dev/null 2>&1 & echo $! > /tmp/sleeper"
	running, addr := create()
	a.sh(running, sleeper)
	stopped, _ := create()
	a.sh(stopped, sleeper)
	a.do("POST", "/v1/sandboxes/"+stopped+"/stop?wait_for_state=stopped", nil)
	if _, err := os.Stat(filepath.Join(d.DataDir, "sandboxes", stopped, "checkpoint.json")); err != nil {
		t.Fatalf("no checkpoint after a stop with memory: %v", err)
	}

	d.Kill()
	if err := d.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}

	a.waitState(running, "running", 60*time.Second)
	if got := a.addr(running); got != addr {
		t.Errorf("address after restart %s, want %s", got, addr)
	}
	if out := a.sh(running, "kill -0 $(cat /tmp/sleeper) && echo alive"); out != "alive\n" {
		t.Errorf("the running gVisor sandbox lost its processes over a ptd restart: %q", out)
	}
	fresh, freshAddr := create()
	if freshAddr == addr {
		t.Errorf("new sandbox %s got the address %s of running gVisor sandbox %s", fresh, addr, running)
	}
	st, m := a.do("POST", "/v1/sandboxes/"+stopped+"/start?wait_for_state=running", nil)
	if st != 200 || m["restore"] != "memory" {
		t.Fatalf("start of a checkpointed sandbox after a ptd restart: %d %v", st, m)
	}
	if out := a.sh(stopped, "kill -0 $(cat /tmp/sleeper) && echo alive"); out != "alive\n" {
		t.Errorf("restored sandbox lost its process: %q", out)
	}
	// The reconciler (30 s) must not rebuild the adopted sandbox either:
	// its process is still the same one after the first pass.
	if !strings.Contains(d.Log(), "adopted endpoint") {
		t.Errorf("ptd did not adopt the running gVisor sandbox's endpoint")
	}
	for _, id := range []string{running, stopped, fresh} {
		a.do("DELETE", "/v1/sandboxes/"+id, nil)
	}
}

// addr returns the sandbox's address on eth0, as the sandbox sees it.
func (a *api) addr(id string) string {
	a.t.Helper()
	for _, f := range strings.Fields(a.sh(id, "ip -4 -o addr show dev eth0")) {
		if ip, _, ok := strings.Cut(f, "/"); ok && strings.Count(ip, ".") == 3 {
			return ip
		}
	}
	a.t.Fatalf("no address on eth0 in %s", id)
	return ""
}
