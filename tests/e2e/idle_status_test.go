package e2e

import (
	"testing"
	"time"
)

// e2eIdleAfter is ptd's --idle-after in this suite (harness_test.go): long
// enough that no test sees a freshly started or just-used sandbox idle,
// short enough to watch one go idle.
const e2eIdleAfter = 5 * time.Second

// TestIdleStatus walks the activity statuses of a running sandbox:
// ready after activity, running while a command is in flight, idle after
// --idle-after without activity, and ready again on the next activity.
func TestIdleStatus(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})
	status := func() string {
		t.Helper()
		r := c.do("GET", "/v1/sandboxes/"+id, nil)
		if r.Status != 200 {
			t.Fatalf("get: %d %s", r.Status, r.Body)
		}
		s, _ := r.JSON()["status"].(string)
		return s
	}

	c.mustSh(id, "true")
	if s := status(); s != "ready" {
		t.Fatalf("after an exec: status %q, want ready", s)
	}

	done := make(chan execResult, 1)
	go func() {
		done <- c.sh(id, "until [ -e /tmp/release ]; do sleep 0.1; done")
	}()
	deadline := time.Now().Add(time.Minute)
	for s := status(); s != "running"; s = status() {
		if time.Now().After(deadline) {
			t.Fatalf("with a command in flight: status %q, want running", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	released := time.Now() // before the last activity (both execs end after it)
	c.mustSh(id, "touch /tmp/release")
	if res := <-done; res.ExitCode != 0 {
		t.Fatalf("waiting command: exit %d %s", res.ExitCode, res.Stderr)
	}
	if s := status(); s != "ready" {
		t.Fatalf("after the command ended: status %q, want ready", s)
	}

	deadline = time.Now().Add(e2eIdleAfter + time.Minute)
	for s := status(); s != "idle"; s = status() {
		if s != "ready" {
			t.Fatalf("without activity: status %q, want ready then idle", s)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %q long after --idle-after %s", s, e2eIdleAfter)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if waited := time.Since(released); waited < e2eIdleAfter {
		t.Errorf("idle %s after the last activity, before --idle-after %s", waited, e2eIdleAfter)
	}

	c.mustSh(id, "true")
	if s := status(); s != "ready" {
		t.Errorf("after new activity: status %q, want ready", s)
	}
}
