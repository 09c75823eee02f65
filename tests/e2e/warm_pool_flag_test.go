package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// TestWarmPoolFlagClass: a ptd started with the flag form `--warm-pool
// busybox@gvisor=1` (docs/sessions.md: the pool of one runtime class set
// by a flag default) lists a gVisor busybox pool in GET /v1/pools, its
// source the flag's, that fills to one ready sandbox by itself; a busybox
// create with runtime gvisor is then served warm from it (its guest runs
// on gVisor's kernel, not the host's), and the pool refills behind it.
func TestWarmPoolFlagClass(t *testing.T) {
	requireGVisor(t, newClient(t))
	d := startNamed(t, "warm-pool-flag", ptdtest.Options{BinDir: env.binDir,
		ExtraArgs: []string{"--pids-limit", "256", "--warm-pool", sessionTemplate + "@gvisor=1"}})
	call := func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, d.URL+path, ptdtest.Body(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+d.Token)
		r, err := ptdtest.Send(nil, req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		var m map[string]any
		json.Unmarshal(r.Body, &m)
		return r.Status, m
	}
	// gvisorPool is the gVisor busybox pool GET /v1/pools lists (nil if
	// none).
	gvisorPool := func() map[string]any {
		t.Helper()
		st, m := call("GET", "/v1/pools", nil)
		if st != 200 {
			t.Fatalf("GET /v1/pools: %d %v", st, m)
		}
		pools, _ := m["pools"].([]any)
		for _, p := range pools {
			if p := p.(map[string]any); p["template"] == sessionTemplate && p["runtime"] == "gvisor" {
				return p
			}
		}
		return nil
	}
	waitReady := func() map[string]any {
		t.Helper()
		deadline := time.Now().Add(5 * time.Minute) // a fresh data dir builds the template first
		for time.Now().Before(deadline) {
			if p := gvisorPool(); p != nil && p["ready"].(float64) >= 1 {
				return p
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("the gvisor pool of the --warm-pool flag never had a ready sandbox: %v", gvisorPool())
		return nil
	}

	p := gvisorPool()
	if p == nil || p["min_ready"] != 1.0 || p["max"] != 1.0 || p["source"] != "default" {
		t.Fatalf("GET /v1/pools after --warm-pool %s@gvisor=1: %v, want a gvisor pool of %s, min_ready and max 1, source default",
			sessionTemplate, p, sessionTemplate)
	}
	waitReady()

	st, sb := call("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=300000",
		map[string]any{"template": sessionTemplate, "runtime": "gvisor"})
	if st != 201 || sb["start"] != "warm" || sb["runtime"] != "gvisor" || sb["state"] != "running" {
		t.Fatalf("a gvisor create with the flag's pool ready: %d start %v runtime %v state %v, want 201 warm gvisor running: %v",
			st, sb["start"], sb["runtime"], sb["state"], sb)
	}
	id := sb["id"].(string)
	t.Cleanup(func() { call("DELETE", "/v1/sandboxes/"+id, nil) })

	release, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	st, res := call("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": "uname -r", "timeout_ms": 60000})
	if out, _ := res["stdout"].(string); st != 200 || res["exit_code"] != 0.0 || strings.TrimSpace(out) == strings.TrimSpace(string(release)) {
		t.Errorf("uname -r in the warm gvisor sandbox: %d %v, want gVisor's kernel, not the host's %q", st, res, release)
	}
	waitReady() // refilled behind the claim
}
