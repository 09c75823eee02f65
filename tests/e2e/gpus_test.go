package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGPUsAtCreate: GET /v1/hosts reports the host's GPUs as its device
// nodes show them (none on the machines this runs on), and a create asking
// for more than the host can give is 409 gpus_unavailable naming what
// exists, with nothing created.
func TestGPUsAtCreate(t *testing.T) {
	c := newClient(t)
	r := c.do("GET", "/v1/hosts", nil)
	if r.Status != 200 {
		t.Fatalf("hosts: %d %s", r.Status, r.Body)
	}
	host := r.JSON()["rows"].([]any)[0].(map[string]any)
	gpus, ok := host["gpus"].([]any)
	if !ok {
		t.Fatalf("hosts answer has no gpus list: %s", r.Body)
	}
	// What the host reports is what /dev has: one entry per /dev/nvidiaN.
	nodes, _ := filepath.Glob("/dev/nvidia[0-9]*")
	if len(gpus) != len(nodes) {
		t.Errorf("host reports %d GPUs, /dev has %v", len(gpus), nodes)
	}
	usable := 0
	for _, g := range gpus {
		if g.(map[string]any)["usable"] == true {
			usable++
		}
	}
	if _, err := os.Stat("/proc/driver/nvidia/version"); err != nil && host["gpu_driver"] != nil {
		t.Errorf("a driver version without a driver: %v", host["gpu_driver"])
	}

	_, before := listCount(t, c)
	want := usable + 1
	r = c.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox", "gpus": want})
	m := r.JSON()
	if r.Status != 409 || m["code"] != "gpus_unavailable" || m["field"] != "gpus" {
		t.Fatalf("gpus %d: %d %s, want 409 gpus_unavailable", want, r.Status, r.Body)
	}
	msg := m["error"].(string)
	if !strings.Contains(msg, fmt.Sprintf("%d GPU", want)) || !strings.Contains(msg, host["id"].(string)) {
		t.Errorf("message %q does not name the request and the host", msg)
	}
	avail, _ := m["available"].([]any)
	if len(avail) != 1 || avail[0].(map[string]any)["host_id"] != host["id"] || avail[0].(map[string]any)["gpus"] != float64(usable) {
		t.Errorf("available %v, want the host with %d", m["available"], usable)
	}
	r = c.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox", "gpus": want, "gpu_model": "H100"})
	if r.Status != 409 || r.JSON()["code"] != "gpus_unavailable" || !strings.Contains(r.JSON()["error"].(string), `"H100"`) {
		t.Errorf("with a model: %d %s", r.Status, r.Body)
	}
	for _, body := range []map[string]any{
		{"template": "busybox", "gpus": 17},
		{"template": "busybox", "gpus": -1},
		{"template": "busybox", "gpu_model": "A100"},
	} {
		if r := c.do("POST", "/v1/sandboxes", body); r.Status != 400 || r.JSON()["code"] != "invalid_request" {
			t.Errorf("%v: %d %s, want 400", body, r.Status, r.Body)
		}
	}
	if _, after := listCount(t, c); after != before {
		t.Errorf("refused creates left sandboxes: %d before, %d after", before, after)
	}
	// gpus 0 is a sandbox without GPUs, and says so.
	id := c.create(map[string]any{"template": "busybox", "gpus": 0})
	if g := c.do("GET", "/v1/sandboxes/"+id, nil).JSON()["gpus"]; g != float64(0) {
		t.Errorf("gpus of a sandbox without: %v", g)
	}
}

// listCount returns every sandbox of the org, destroyed and failed ones
// included, and how many there are.
func listCount(t *testing.T, c *client) ([]any, int) {
	t.Helper()
	r := c.do("GET", "/v1/sandboxes?include=destroyed,failed&paginated=true&limit=200", nil)
	if r.Status != 200 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	rows, _ := r.JSON()["rows"].([]any)
	return rows, int(r.JSON()["total"].(float64))
}
