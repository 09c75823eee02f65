package crash

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestKillDuringWarmCreate kills ptd in the middle of a create served by a
// warm pool: after the pooled sandbox is taken out of the pool, after the
// host resized it live to the caller's cpu and ram_mb (runc), and after
// the caller's environment is set in its guest. After the restart the
// create left nothing in the caller's org, the half-claimed sandbox is
// discarded (never handed to the next create, whose guest must not see
// the first caller's environment), and the pool refills to its size.
func TestKillDuringWarmCreate(t *testing.T) {
	d, a := startDaemon(t)
	if st, m := a.do("PUT", "/v1/pools/busybox", map[string]any{"min_ready": 1, "max": 1}); st != 200 {
		t.Fatalf("set pool: %d %v", st, m)
	}
	t.Cleanup(func() { a.try("PUT", "/v1/pools/busybox", map[string]any{"min_ready": 0, "max": 0}, nil) })
	// settled: one ready sandbox and nothing else in the pool (a claim a
	// crash left would count as on its way until discarded).
	settled := func() string {
		_, m := a.do("GET", "/v1/pools", nil)
		for _, p := range m["pools"].([]any) {
			if p := p.(map[string]any); p["template"] == "busybox" && p["ready"] == 1.0 && p["provisioning"] == 0.0 {
				return ""
			}
		}
		return fmt.Sprintf("pool never settled at one ready sandbox: %v", m)
	}
	for _, tc := range []struct {
		step  string
		sized bool // the create asks another cpu and ram_mb than the pool's
	}{{"warm.reserved", false}, {"warm.resized", true}, {"warm.initialized", false}} {
		step := tc.step
		eventually(t, 3*time.Minute, settled)
		tag := strings.ReplaceAll(step, ".", "-")
		armCrash(t, d, step)
		body := map[string]any{"template": "busybox", "env": map[string]any{"CALLER": tag}, "metadata": map[string]any{"crash": tag}}
		if tc.sized {
			body["cpu"], body["ram_mb"] = 2, 1024
		}
		if st, m, err := a.try("POST", "/v1/sandboxes", body, nil); err == nil {
			t.Fatalf("%s: create answered %d %v; ptd should have died", step, st, m)
		}
		crashed(t, d, step)

		if _, l := a.do("GET", "/v1/sandboxes?include=destroyed,failed&metadata[crash]="+tag, nil); len(l["rows"].([]any)) != 0 {
			t.Errorf("%s: the create that never answered left %v", step, l["rows"])
		}
		eventually(t, 3*time.Minute, settled)

		next := map[string]any{"template": "busybox", "env": map[string]any{"OTHER": "next"}}
		st, m := a.do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=120000", next)
		if st != 201 || m["start"] != "warm" {
			t.Fatalf("%s: the next create: %d start %v, want a warm create", step, st, m["start"])
		}
		id := m["id"].(string)
		if out := a.sh(id, `echo "${CALLER:-none} $OTHER"`); out != "none next\n" {
			t.Errorf("%s: the next warm sandbox's guest sees %q, want only its own env", step, out)
		}
		if out := a.sh(id, "nproc"); out != "1\n" {
			t.Errorf("%s: the next warm sandbox (1 cpu) has %q cpus online: a half-claimed, resized one was reused", step, out)
		}
		a.do("DELETE", "/v1/sandboxes/"+id, nil)
	}
}
