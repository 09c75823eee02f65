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
}
