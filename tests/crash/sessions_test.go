package crash

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// TestKillDuringSessions kills ptd during a cold provision (before and
// after its sandbox exists), during a stop's workspace save and during a
// warm claim that restores a workspace. After each restart the session
// ends ready or failed with a reason (never provisioning), the sandbox a
// crash left unnamed is adopted rather than leaked, the saved workspace
// survives, the pool refills, and no pooled sandbox serves two sessions.
func TestKillDuringSessions(t *testing.T) {
	d, a := startDaemon(t, "--session-template", "busybox")
	vault := "v-" + ptdtest.RandHex(4)
	var sessions []string
	t.Cleanup(func() {
		for _, id := range sessions {
			a.try("DELETE", "/v1/sessions/"+id, nil, nil)
		}
	})
	// find returns the context's live (else newest) session once it is not
	// provisioning or stopping.
	settled := func(wf string) map[string]any {
		t.Helper()
		var m map[string]any
		eventually(t, 90*time.Second, func() string {
			_, m = a.do("GET", "/v1/sessions/status?vault_id="+vault+"&workflow_id="+wf, nil)
			switch m["status"] {
			case "provisioning", "stopping", "none", nil:
				return fmt.Sprintf("session of %s stuck: %v", wf, m)
			}
			return ""
		})
		id, _ := m["session_id"].(string)
		sessions = append(sessions, id)
		_, full := a.do("GET", "/v1/sessions/"+id, nil)
		return full
	}
	create := func(step, wf string) {
		t.Helper()
		armCrash(t, d, step)
		if st, m, err := a.try("POST", "/v1/sessions?wait_timeout_ms=60000", map[string]any{"vault_id": vault, "workflow_id": wf}, nil); err == nil && step != "session.stop.saving" {
			t.Fatalf("%s: create answered %d %v; ptd should have died", step, st, m)
		}
		crashed(t, d, step)
	}
	sesExec := func(id, script string) string {
		t.Helper()
		st, m := a.do("POST", "/v1/sessions/"+id+"/exec", map[string]any{"cmd": script})
		if st != 200 || m["exit_code"] != 0.0 {
			t.Fatalf("session exec %q: %d %v", script, st, m)
		}
		return m["stdout"].(string)
	}
	noOrphans := func(ses map[string]any) {
		t.Helper()
		for _, r := range a.tagged("pt_session_id", ses["session_id"].(string)) {
			r := r.(map[string]any)
			if r["id"] != ses["sandbox_id"] && r["state"] != "deleting" {
				t.Errorf("session %s (%s) left sandbox %s %s running unowned", ses["session_id"], ses["status"], r["id"], r["state"])
			}
		}
	}

	// Cold, before the sandbox exists: failed, with the reason.
	create("session.cold.recorded", "wf-1")
	s := settled("wf-1")
	if s["status"] != "failed" || s["reason"] == "" {
		t.Errorf("crash before the sandbox: session %v (%v), want failed with a reason", s["status"], s["reason"])
	}
	noOrphans(s)

	// Cold, the sandbox made but not yet the session's: adopted, ready.
	create("session.cold.created", "wf-2")
	s = settled("wf-2")
	if s["status"] != "ready" {
		t.Fatalf("crash after the sandbox was made: session %v (%v), want ready", s["status"], s["reason"])
	}
	noOrphans(s)
	sesExec(s["session_id"].(string), "echo kept > /workspace/keep")

	// Stop, the workspace tar made but not stored: the restart saves it.
	armCrash(t, d, "session.stop.saving")
	a.try("DELETE", "/v1/sessions/"+s["session_id"].(string), nil, nil)
	crashed(t, d, "session.stop.saving")
	var stopped map[string]any
	eventually(t, 90*time.Second, func() string {
		_, stopped = a.do("GET", "/v1/sessions/"+s["session_id"].(string), nil)
		if stopped["status"] != "stopped" && stopped["status"] != "failed" {
			return fmt.Sprintf("stop interrupted by a crash: session stuck %v", stopped["status"])
		}
		return ""
	})
	if stopped["status"] != "stopped" || strings.Contains(fmt.Sprint(stopped["reason"]), "failed") {
		t.Errorf("stop interrupted by a crash ended %v (%v)", stopped["status"], stopped["reason"])
	}

	// The pool's first sandbox is recorded when ptd dies: after the
	// restart the pool fills without going past its max.
	armCrash(t, d, "pool.created")
	st, m, err := a.try("PUT", "/v1/pools/busybox", map[string]any{"min_ready": 1, "max": 2}, nil)
	if err == nil && st != 200 {
		t.Fatalf("set pool: %d %v", st, m)
	}
	crashed(t, d, "pool.created")
	t.Cleanup(func() { a.try("PUT", "/v1/pools/busybox", map[string]any{"min_ready": 0, "max": 0}, nil) })
	poolReady := func() string {
		_, m := a.do("GET", "/v1/pools", nil)
		for _, p := range m["pools"].([]any) {
			p := p.(map[string]any)
			if p["template"] != "busybox" {
				continue
			}
			if n := p["ready"].(float64) + p["provisioning"].(float64); n > p["max"].(float64) {
				t.Errorf("pool holds %v sandboxes, over its max: %v", n, p)
			}
			if p["ready"].(float64) >= 1 {
				return ""
			}
		}
		return fmt.Sprintf("pool never refilled: %v", m)
	}
	eventually(t, 90*time.Second, poolReady)
	create("session.warm.claimed", "wf-2")
	s = settled("wf-2")
	if s["status"] != "ready" || s["warm"] != true {
		t.Fatalf("crash during a warm claim: session %v warm %v (%v), want ready from the pool", s["status"], s["warm"], s["reason"])
	}
	if out := sesExec(s["session_id"].(string), "cat /workspace/keep"); out != "kept\n" {
		t.Errorf("workspace after a stop and a claim interrupted by crashes: %q", out)
	}
	eventually(t, 90*time.Second, poolReady)

	// No pooled sandbox serves two sessions.
	_, all := a.do("GET", "/v1/sessions?all=true", nil)
	seen := map[string]string{}
	for _, x := range all["sessions"].([]any) {
		x := x.(map[string]any)
		sb, _ := x["sandbox_id"].(string)
		if sb == "" {
			continue
		}
		if other, dup := seen[sb]; dup {
			t.Errorf("sandbox %s served sessions %s and %s", sb, other, x["session_id"])
		}
		seen[sb] = x["session_id"].(string)
	}
}
