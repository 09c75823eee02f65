package httpapi

import (
	"context"
	"sync"
	"testing"

	"github.com/platinum-dev/platinum/internal/controlplane"
)

// gatedHost is a slowHost whose starts and stops each wait on their own
// gate, which a test opens and closes at will.
type gatedHost struct {
	*slowHost
	mu          sync.Mutex
	start, stop chan struct{}
}

func openGate() chan struct{} { c := make(chan struct{}); close(c); return c }

func (h *gatedHost) gate(which *chan struct{}, open bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if open {
		select {
		case <-*which:
		default:
			close(*which)
		}
		return
	}
	*which = make(chan struct{})
}

func (h *gatedHost) wait(ctx context.Context, which *chan struct{}) {
	h.mu.Lock()
	c := *which
	h.mu.Unlock()
	select {
	case <-c:
	case <-ctx.Done():
	}
}

func (h *gatedHost) Start(ctx context.Context, spec controlplane.StartSpec) (controlplane.Instance, error) {
	h.wait(ctx, &h.start)
	return controlplane.Instance{Address: "127.0.0.1"}, nil
}

func (h *gatedHost) Stop(ctx context.Context, id string, keep bool) (bool, error) {
	h.wait(ctx, &h.stop)
	return false, nil
}

// TestStartStopWaitRunsOutIs202: /start, /resume, /stop and /pause with
// wait_for_state answer 200 only in the target state; a wait that runs out
// is a 202 with wait_timed_out, Retry-After: 5 and the state the sandbox
// is still in (starting, stopping), without restore fields. Without a wait,
// and on a sandbox already there, they answer 200 with the record.
func TestStartStopWaitRunsOutIs202(t *testing.T) {
	h := &gatedHost{slowHost: &slowHost{release: openGate()}, start: openGate(), stop: openGate()}
	srv := serveHost(t, h, nil)
	t.Cleanup(func() {
		h.gate(&h.start, true)
		h.gate(&h.stop, true)
	})
	_, m := call(t, srv, "tok", "POST", "/v1/sandboxes?wait_for_state=running", `{"template":"busybox"}`)
	id, _ := m["id"].(string)
	if m["state"] != "running" {
		t.Fatalf("create: %v", m)
	}
	timedOut := func(what, path, state string) {
		t.Helper()
		resp, m := call(t, srv, "tok", "POST", path, "")
		if resp.StatusCode != 202 || m["wait_timed_out"] != true || m["state"] != state || resp.Header.Get("Retry-After") != "5" || m["id"] != id {
			t.Errorf("%s: %d Retry-After %q %v", what, resp.StatusCode, resp.Header.Get("Retry-After"), m)
		}
		for _, k := range []string{"restore", "ram_restored"} {
			if _, ok := m[k]; ok {
				t.Errorf("%s: %s present on a 202: %v", what, k, m)
			}
		}
	}
	done := func(what, path, state string) map[string]any {
		t.Helper()
		resp, m := call(t, srv, "tok", "POST", path, "")
		if resp.StatusCode != 200 || m["state"] != state || m["wait_timed_out"] != nil || m["id"] != id {
			t.Errorf("%s: %d %v", what, resp.StatusCode, m)
		}
		return m
	}

	h.gate(&h.stop, false)
	timedOut("stop wait runs out", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped&wait_timeout_ms=100", "stopping")
	timedOut("pause wait runs out", "/v1/sandboxes/"+id+"/pause?wait_for_state=stopped&wait_timeout_ms=100", "stopping")
	h.gate(&h.stop, true)
	done("stop wait reached", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped&wait_timeout_ms=10000", "stopped")
	done("stop of stopped, no wait", "/v1/sandboxes/"+id+"/stop", "stopped")

	h.gate(&h.start, false)
	timedOut("start wait runs out", "/v1/sandboxes/"+id+"/start?wait_for_state=running&wait_timeout_ms=100", "starting")
	timedOut("resume wait runs out", "/v1/sandboxes/"+id+"/resume?wait_for_state=running&wait_timeout_ms=100", "starting")
	h.gate(&h.start, true)
	m = done("start wait reached", "/v1/sandboxes/"+id+"/start?wait_for_state=running&wait_timeout_ms=10000", "running")
	if m["restore"] != "disk_only" || m["ram_restored"] != false {
		t.Errorf("a start that reached running says what came back: %v", m)
	}
	done("start of running, no wait", "/v1/sandboxes/"+id+"/start", "running")
	done("pause", "/v1/sandboxes/"+id+"/pause?wait_for_state=stopped", "stopped")
	done("resume", "/v1/sandboxes/"+id+"/resume?wait_for_state=running", "running")
}
