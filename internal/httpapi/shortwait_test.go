package httpapi

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// busyStore is a store whose sandbox reads take a few milliseconds, as a
// database under load does, and honour their context as SQLite's do: a
// deadline that leaks from a wait into the operation shows up as a
// failed call.
type busyStore struct{ store.Store }

func (s busyStore) GetSandbox(ctx context.Context, org, id string) (sandbox.Sandbox, error) {
	select {
	case <-time.After(3 * time.Millisecond):
	case <-ctx.Done():
		return sandbox.Sandbox{}, ctx.Err()
	}
	return s.Store.GetSandbox(ctx, org, id)
}

// TestShortWaitNeverCancelsTheOperation: a wait_timeout_ms shorter than
// the operation bounds only the wait. Start, stop and create with waits of
// 1, 5 and 50 ms answer 202 with wait_timed_out, Retry-After: 5 and the
// state the sandbox is in, and the operation still ends where it was
// asked to (an idle host's start queue never refuses a start for a short
// wait).
func TestShortWaitNeverCancelsTheOperation(t *testing.T) {
	h := &gatedHost{slowHost: &slowHost{release: openGate()}, start: openGate(), stop: openGate()}
	srv := serveStore(t, h, nil, func(st store.Store) store.Store { return busyStore{st} })
	t.Cleanup(func() {
		h.gate(&h.start, true)
		h.gate(&h.stop, true)
	})
	accepted := func(t *testing.T, what, path, body string, states ...string) string {
		t.Helper()
		resp, m := call(t, srv, "tok", "POST", path, body)
		st, _ := m["state"].(string)
		ok := false
		for _, s := range states {
			ok = ok || s == st
		}
		if resp.StatusCode != 202 || m["wait_timed_out"] != true || resp.Header.Get("Retry-After") != "5" || !ok {
			t.Fatalf("%s: %d Retry-After %q %v; want 202 wait_timed_out in %v", what, resp.StatusCode, resp.Header.Get("Retry-After"), m, states)
		}
		id, _ := m["id"].(string)
		return id
	}
	settles := func(t *testing.T, what, id, state string) {
		t.Helper()
		var m map[string]any
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if _, m = call(t, srv, "tok", "GET", "/v1/sandboxes/"+id, ""); m["state"] == state {
				return
			}
		}
		t.Fatalf("%s: the operation did not go on after the wait: %v", what, m)
	}
	for _, ms := range []int{1, 5, 50} {
		t.Run(fmt.Sprintf("%dms", ms), func(t *testing.T) {
			q := fmt.Sprintf("wait_timeout_ms=%d", ms)
			h.gate(&h.start, false)
			id := accepted(t, "create", "/v1/sandboxes?wait_for_state=running&"+q, `{"template":"busybox"}`, "creating")
			h.gate(&h.start, true)
			settles(t, "create", id, "running")

			h.gate(&h.stop, false)
			accepted(t, "stop", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped&"+q, "", "stopping")
			h.gate(&h.stop, true)
			settles(t, "stop", id, "stopped")

			h.gate(&h.start, false)
			accepted(t, "start", "/v1/sandboxes/"+id+"/start?wait_for_state=running&"+q, "", "starting")
			h.gate(&h.start, true)
			settles(t, "start", id, "running")
		})
	}
}
