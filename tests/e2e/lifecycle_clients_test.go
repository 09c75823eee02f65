package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestLifecycleThroughCLIAndSDK: `pt sandbox stop|start ID --wait` and the
// SDK's Stop/Start with WaitForStopped/WaitForRunning drive a real ptd;
// each start says what came back (memory, after a warm stop).
func TestLifecycleThroughCLIAndSDK(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox", "runtime": "runc"})

	out, errOut, code := pt(t, nil, "sandbox", "stop", id, "--wait")
	if code != 0 || out != "sandbox "+id+": stopped\n" {
		t.Fatalf("pt sandbox stop --wait: %d %q %q", code, out, errOut)
	}
	if st := c.do("GET", "/v1/sandboxes/"+id, nil).JSON()["state"]; st != "stopped" {
		t.Fatalf("after pt sandbox stop: %v", st)
	}
	out, errOut, code = pt(t, nil, "sandbox", "start", id, "--wait")
	if code != 0 || !strings.HasPrefix(out, "sandbox "+id+": running\nrestored: memory") {
		t.Fatalf("pt sandbox start --wait: %d %q %q", code, out, errOut)
	}

	ctx := context.Background()
	cl := platinum.New(env.url, env.token)
	sb, err := cl.Sandboxes.Stop(ctx, id, platinum.WaitForStopped(time.Minute))
	if err != nil || sb.State != platinum.StateStopped {
		t.Fatalf("SDK Stop(WaitForStopped): %+v %v", sb, err)
	}
	sb, err = cl.Sandboxes.Start(ctx, id, platinum.WaitForRunning(time.Minute))
	if err != nil || sb.State != platinum.StateRunning || sb.Restore == nil || *sb.Restore != platinum.RestoreMemory ||
		sb.RAMRestored == nil || !*sb.RAMRestored {
		t.Fatalf("SDK Start(WaitForRunning): %+v %v", sb, err)
	}
	if ls, err := sb.LastStart(); err != nil || ls == nil || ls.Restore != platinum.RestoreMemory {
		t.Errorf("SDK LastStart: %+v %v", ls, err)
	}

	// pt sandbox rm: the record stays, deleted, with when and why; a plain
	// GET is 404 not_found.
	if _, errOut, code := pt(t, nil, "sandbox", "rm", id); code != 0 {
		t.Fatalf("pt sandbox rm: %d %s", code, errOut)
	}
	waitState(t, c, id, "deleted")
	if r := c.do("GET", "/v1/sandboxes/"+id, nil); r.Status != 404 || r.JSON()["code"] != "not_found" {
		t.Errorf("GET of a deleted sandbox: %d %s", r.Status, r.Body)
	}
	r := c.do("GET", "/v1/sandboxes/"+id+"?include_deleted=true", nil)
	if m := r.JSON(); r.Status != 200 || m["state"] != "deleted" || m["deleted_reason"] != "user_deleted" || m["deleted_at"] == nil {
		t.Errorf("GET ?include_deleted=true: %d %s", r.Status, r.Body)
	}
}

// TestRetentionThroughAPI: type sets the timers' defaults on the record
// (persistent when absent), a field overrides one, 0 disables it, a bad
// type is 400 invalid_request naming the field; an ephemeral sandbox is
// deleted when it stops, and the stop's wait answers 200.
func TestRetentionThroughAPI(t *testing.T) {
	c := newClient(t)
	for _, tc := range []struct {
		body               map[string]any
		typ                string
		stop, arch, delete float64
	}{
		{map[string]any{}, "persistent", 60, 7, 0},
		{map[string]any{"type": "dev", "auto_delete_days": 90}, "dev", 120, 30, 90},
		{map[string]any{"auto_stop_minutes": 0, "auto_archive_days": 0}, "persistent", 0, 0, 0},
		{map[string]any{"type": "ephemeral"}, "ephemeral", 15, 0, 0},
	} {
		tc.body["template"] = "busybox"
		id := c.create(tc.body)
		m := c.do("GET", "/v1/sandboxes/"+id, nil).JSON()
		if m["type"] != tc.typ || m["auto_stop_minutes"] != tc.stop || m["auto_archive_days"] != tc.arch || m["auto_delete_days"] != tc.delete {
			t.Errorf("create %v: type %v timers %v/%v/%v", tc.body, m["type"], m["auto_stop_minutes"], m["auto_archive_days"], m["auto_delete_days"])
		}
		if tc.typ != "ephemeral" {
			continue
		}
		r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil)
		if st := r.JSON()["state"]; r.Status != 200 || (st != "stopped" && st != "deleting" && st != "deleted") {
			t.Errorf("stop of an ephemeral sandbox: %d %s", r.Status, r.Body)
		}
		waitState(t, c, id, "deleted")
		if m := c.do("GET", "/v1/sandboxes/"+id+"?include_deleted=true", nil).JSON(); m["deleted_reason"] != "auto_deleted" {
			t.Errorf("ephemeral after stop: %v", m)
		}
	}
	r := c.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox", "type": "forever"})
	if m := r.JSON(); r.Status != 400 || m["code"] != "invalid_request" || m["field"] != "type" {
		t.Errorf("bad type: %d %s", r.Status, r.Body)
	}
}
