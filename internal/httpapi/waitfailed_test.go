package httpapi

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/platinum-dev/platinum/internal/controlplane"
)

// failingStartHost fails every start while fail is set.
type failingStartHost struct {
	*slowHost
	fail atomic.Bool
}

func (h *failingStartHost) Start(ctx context.Context, spec controlplane.StartSpec) (controlplane.Instance, error) {
	if h.fail.Load() {
		return controlplane.Instance{}, errors.New("host: runtime: no capacity")
	}
	return controlplane.Instance{Address: "127.0.0.1"}, nil
}

func (h *failingStartHost) Stop(ctx context.Context, id string, keep bool) (bool, error) {
	return false, nil
}

// TestWaitEndingFailedIsNever2xx: a wait is never a 2xx before the target
// state (docs/lifecycle.md, "Waiting for a state"). A create or start whose wait ends with the sandbox failed is a
// 409 sandbox_failed whose body is the record (id, state, reason), so the
// caller can start it again or delete it.
func TestWaitEndingFailedIsNever2xx(t *testing.T) {
	h := &failingStartHost{slowHost: &slowHost{release: make(chan struct{})}}
	srv := serveHost(t, h, nil)
	failed := func(what string, status int, m map[string]any) string {
		t.Helper()
		id, _ := m["id"].(string)
		if status != 409 || m["code"] != "sandbox_failed" || m["state"] != "failed" || id == "" ||
			!strings.Contains(m["reason"].(string), "no capacity") || !strings.Contains(m["error"].(string), "start it again") {
			t.Fatalf("%s: %d %v", what, status, m)
		}
		return id
	}

	h.fail.Store(true)
	resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes?wait_for_state=running", `{"template":"busybox"}`)
	id := failed("create with a wait", resp.StatusCode, m)
	resp, m = call(t, srv, "tok", "POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", "")
	failed("start with a wait", resp.StatusCode, m)
	// Without a wait the calls answer as before; the record says failed.
	if resp, m := call(t, srv, "tok", "GET", "/v1/sandboxes/"+id, ""); resp.StatusCode != 200 || m["state"] != "failed" {
		t.Fatalf("get: %d %v", resp.StatusCode, m)
	}
	// From failed, a start that works reaches running: 200.
	h.fail.Store(false)
	if resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", ""); resp.StatusCode != 200 || m["state"] != "running" {
		t.Fatalf("start after the host recovered: %d %v", resp.StatusCode, m)
	}
}
