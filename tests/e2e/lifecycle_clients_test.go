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
