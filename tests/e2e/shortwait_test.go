package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestShortWaitNeverCancelsTheOperation: on both runtime classes, create,
// stop and start with wait_timeout_ms of 1, 5 and 50 ms answer either the
// target state (the operation was that quick) or 202 with wait_timed_out,
// Retry-After: 5 and the state the sandbox is in now — never a 504 — and
// the operation goes on after the wait: the sandbox reaches the state it
// was asked for, and runs commands after the start.
func TestShortWaitNeverCancelsTheOperation(t *testing.T) {
	for _, rt := range []string{"runc", "gvisor"} {
		for _, ms := range []int{1, 5, 50} {
			t.Run(fmt.Sprintf("%s/%dms", rt, ms), func(t *testing.T) {
				c := newClient(t)
				q := fmt.Sprintf("wait_timeout_ms=%d", ms)
				r := c.do("POST", "/v1/sandboxes?wait_for_state=running&"+q, map[string]any{"template": "busybox", "runtime": rt})
				id, _ := r.JSON()["id"].(string)
				if id != "" {
					t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
				}
				shortWaitAnswer(t, "create", r, 201, "running", "creating")
				settle(t, c, id, "running")

				r = c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped&"+q, nil)
				shortWaitAnswer(t, "stop", r, 200, "stopped", "stopping")
				settle(t, c, id, "stopped")

				r = c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running&"+q, nil)
				shortWaitAnswer(t, "start", r, 200, "running", "starting")
				settle(t, c, id, "running")
				if out := c.mustSh(id, "echo up"); out != "up\n" {
					t.Errorf("exec after the start: %q", out)
				}
			})
		}
	}
}

// shortWaitAnswer checks a call whose wait may have run out: okStatus in
// the target state, or 202 wait_timed_out with Retry-After: 5 in the
// transitional state.
func shortWaitAnswer(t *testing.T, what string, r response, okStatus int, target, transitional string) {
	t.Helper()
	m := r.JSON()
	switch {
	case r.Status == okStatus && m["state"] == target && m["wait_timed_out"] == nil:
	case r.Status == 202 && m["wait_timed_out"] == true && r.Header.Get("Retry-After") == "5" && m["state"] == transitional:
	default:
		t.Fatalf("%s: %d Retry-After %q %s; want %d %s or 202 wait_timed_out %s", what, r.Status, r.Header.Get("Retry-After"), r.Body, okStatus, target, transitional)
	}
}

// settle polls the sandbox until it is in state (failing after 2 min).
func settle(t *testing.T, c *client, id, state string) {
	t.Helper()
	var last response
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if last = c.do("GET", "/v1/sandboxes/"+id, nil); last.JSON()["state"] == state {
			return
		}
	}
	t.Fatalf("sandbox %s never reached %s after the wait ran out: %s", id, state, last.Body)
}
