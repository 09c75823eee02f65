package httpapi

import (
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
)

// TestStartWhileHostBusyIs503Capacity: docs/stop-start.md, "Starting
// while the host is busy". With every start slot taken, a start
// waits for one, bounded by the call's wait_timeout_ms; one the queue
// cannot admit answers 503 capacity with Retry-After: 5, the reason and
// queued_ms, and the sandbox stays stopped. Once a slot frees, the same
// call succeeds. Creates are not queued.
func TestStartWhileHostBusyIs503Capacity(t *testing.T) {
	h := &gatedHost{slowHost: &slowHost{release: openGate()}, start: openGate(), stop: openGate()}
	srv := serveHost(t, h, func(c *controlplane.Config) {
		c.Admission = controlplane.AdmissionConfig{Queue: true, Slots: 1, SlotsSaturated: 1, Wait: time.Minute, MaxQueue: 4}
	})
	t.Cleanup(func() { h.gate(&h.start, true) })
	var ids []string
	for range 2 {
		resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes?wait_for_state=running", `{"template":"busybox"}`)
		if resp.StatusCode != 201 {
			t.Fatalf("create: %d %v", resp.StatusCode, m)
		}
		ids = append(ids, m["id"].(string))
		if resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes/"+ids[len(ids)-1]+"/stop?wait_for_state=stopped", ""); resp.StatusCode != 200 {
			t.Fatalf("stop: %d %v", resp.StatusCode, m)
		}
	}
	// The host's one start slot is held by a start that does not finish.
	h.gate(&h.start, false)
	if resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes/"+ids[0]+"/start", ""); resp.StatusCode != 200 || m["state"] != "starting" {
		t.Fatalf("first start: %d %v", resp.StatusCode, m)
	}
	// A create is not queued: it provisions (and waits on the host) at once.
	if resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes", `{"template":"busybox"}`); resp.StatusCode != 201 {
		t.Fatalf("create while the slot is taken: %d %v", resp.StatusCode, m)
	}
	resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes/"+ids[1]+"/start?wait_for_state=running&wait_timeout_ms=300", "")
	q, _ := m["queued_ms"].(float64)
	if resp.StatusCode != 503 || m["code"] != "capacity" || m["reason"] != "start_queue_timeout" || q < 250 || resp.Header.Get("Retry-After") != "5" {
		t.Fatalf("start while the host is busy: %d Retry-After %q %v", resp.StatusCode, resp.Header.Get("Retry-After"), m)
	}
	if _, m := call(t, srv, "tok", "GET", "/v1/sandboxes/"+ids[1], ""); m["state"] != "stopped" {
		t.Fatalf("a refused start moved the sandbox: %v", m)
	}
	// The slot frees when the first start ends; the call works again.
	h.gate(&h.start, true)
	if resp, m := call(t, srv, "tok", "POST", "/v1/sandboxes/"+ids[1]+"/start?wait_for_state=running", ""); resp.StatusCode != 200 || m["state"] != "running" {
		t.Fatalf("start after the slot freed: %d %v", resp.StatusCode, m)
	}
}
