package httpapi

import (
	"context"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
)

// stopGateHost starts at once and stops only when stop is closed.
type stopGateHost struct {
	*slowHost
	stop chan struct{}
}

func (h *stopGateHost) Start(ctx context.Context, spec controlplane.StartSpec) (controlplane.Instance, error) {
	return controlplane.Instance{Address: "127.0.0.1"}, nil
}

func (h *stopGateHost) Stop(ctx context.Context, id string, keep bool) (bool, error) {
	select {
	case <-h.stop:
	case <-ctx.Done():
	}
	return false, nil
}

// TestResizeWhileStoppingIs202Pending: a resize while the sandbox is
// still stopping answers 202 with applies_at "pending" and records the
// size at once (docs/resize.md). The sandbox reads its new size once the stop is done.
func TestResizeWhileStoppingIs202Pending(t *testing.T) {
	h := &stopGateHost{slowHost: &slowHost{release: make(chan struct{})}, stop: make(chan struct{})}
	srv := serveHost(t, h, nil)
	released := false
	t.Cleanup(func() {
		if !released {
			close(h.stop)
		}
	})
	resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes?wait_for_state=running", `{"template":"busybox","cpu":1,"ram_mb":512}`)
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %v", resp.StatusCode, m)
	}
	id := m["id"].(string)
	if resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes/"+id+"/stop", ""); resp.StatusCode != 200 || m["state"] != "stopping" {
		t.Fatalf("stop: %d %v", resp.StatusCode, m)
	}
	resp, m = call(t, srv, "tok", "POST", "/v1/sandboxes/"+id+"/resize", `{"cpu":2,"ram_mb":1024}`)
	req, _ := m["requested"].(map[string]any)
	if resp.StatusCode != 202 || m["applies_at"] != "pending" || m["cpu"] != 2.0 || req["cpu"] != 2.0 || req["ram_mb"] != 1024.0 {
		t.Fatalf("resize while stopping: %d %v", resp.StatusCode, m)
	}
	// "Read the sandbox for its size": recorded already, the stop unfinished.
	if _, m := call(t, srv, "tok", "GET", "/v1/sandboxes/"+id, ""); m["state"] != "stopping" || m["cpu"] != 2.0 || m["ram_mb"] != 1024.0 {
		t.Fatalf("record while the stop runs: %v", m)
	}
	if resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes/"+id+"/resize", `{"disk_gb":1}`); resp.StatusCode != 400 || m["code"] != "invalid_request" {
		t.Errorf("disk shrink while stopping: %d %v", resp.StatusCode, m)
	}
	close(h.stop)
	released = true
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, m = call(t, srv, "tok", "GET", "/v1/sandboxes/"+id, "")
		if m["state"] == "stopped" && m["cpu"] == 2.0 && m["ram_mb"] == 1024.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pending resize never showed: %v", m)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
