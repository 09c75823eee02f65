package e2e

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestResizeByClass runs the resize contract on both runtime classes. A
// running runc sandbox changes cpu and ram_mb live and its guest sees it
// (nproc, MemTotal). A running gvisor sandbox cannot (gVisor fixes the
// CPU count and memory its guest sees at boot): the resize is 409
// sandbox_not_resizable with the reason and the stop-then-resize hint,
// the record keeps the size the guest has, and GET /v1/hosts says
// live_resize false for the class. On both, the disk grows online (df
// sees it at once) and a stopped resize boots cold at the new size.
func TestResizeByClass(t *testing.T) {
	for _, rt := range []string{"runc", "gvisor"} {
		t.Run(rt, func(t *testing.T) {
			c := newClient(t)
			id := c.create(map[string]any{"template": "busybox", "runtime": rt, "cpu": 1, "ram_mb": 512, "disk_gb": 1})
			nproc := func() string { return strings.TrimSpace(c.mustSh(id, "nproc")) }
			memMB := func() int64 { return memTotalKB(t, c, id) / 1024 }
			if n := nproc(); n != "1" {
				t.Errorf("nproc at boot = %s", n)
			}
			bootMem := memMB()
			if bootMem > 512 || bootMem < 400 {
				t.Errorf("MemTotal at boot = %d MB, want about 512", bootMem)
			}
			cpus := strconv.Itoa(min(2, runtime.NumCPU()))

			r := c.do("POST", "/v1/sandboxes/"+id+"/resize", map[string]any{"cpu": 2, "ram_mb": 1024})
			m := r.JSON()
			switch rt {
			case "runc":
				if r.Status != 200 || m["applies_at"] != "now" || m["cpu"] != 2.0 || m["ram_mb"] != 1024.0 {
					t.Fatalf("live resize: %d %s", r.Status, r.Body)
				}
				if n := nproc(); n != cpus {
					t.Errorf("nproc after a live resize to 2 = %s", n)
				}
				if mb := memMB(); mb != 1024 {
					t.Errorf("MemTotal after a live resize to 1024 MB = %d MB", mb)
				}
			case "gvisor":
				lr, _ := m["live_resize"].(map[string]any)
				hint, _ := m["hint"].(map[string]any)
				if r.Status != 409 || m["code"] != "sandbox_not_resizable" || lr == nil || lr["supported"] != false ||
					!strings.Contains(lr["reason"].(string), "gvisor") || hint == nil || hint["action"] != "stop_then_resize" {
					t.Fatalf("gvisor live resize: %d %s", r.Status, r.Body)
				}
				got := c.do("GET", "/v1/sandboxes/"+id, nil).JSON()
				if got["cpu"] != 1.0 || got["ram_mb"] != 512.0 {
					t.Errorf("record after a refused resize: cpu %v ram_mb %v", got["cpu"], got["ram_mb"])
				}
				if n, mb := nproc(), memMB(); n != "1" || mb != bootMem {
					t.Errorf("guest after a refused resize: nproc %s, MemTotal %d MB (boot %d)", n, mb, bootMem)
				}
				if cl := hostClass(t, c, "gvisor"); cl["live_resize"] != false || cl["live_resize_unavailable_reason"] == nil {
					t.Errorf("hosts: gvisor class %v", cl)
				}
			}
			if cl := hostClass(t, c, "runc"); cl["live_resize"] != true {
				t.Errorf("hosts: runc class %v", cl)
			}

			before := diskKB(t, c, id)
			if r := c.do("POST", "/v1/sandboxes/"+id+"/resize", map[string]any{"disk_gb": 2}); r.Status != 200 || r.JSON()["disk_gb"] != 2.0 || r.JSON()["applies_at"] != "now" {
				t.Fatalf("disk grow: %d %s", r.Status, r.Body)
			}
			if after := diskKB(t, c, id); after < before+900*1024 {
				t.Errorf("df did not grow online: %d → %d KB", before, after)
			}

			if r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); r.Status != 200 {
				t.Fatalf("stop: %d %s", r.Status, r.Body)
			}
			if r := c.do("POST", "/v1/sandboxes/"+id+"/resize", map[string]any{"cpu": 2, "ram_mb": 768}); r.Status != 200 || r.JSON()["applies_at"] != "next_start" {
				t.Fatalf("stopped resize: %d %s", r.Status, r.Body)
			}
			r = c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil)
			if r.Status != 200 || r.JSON()["restore"] != "disk_only" || r.JSON()["cpu"] != 2.0 || r.JSON()["ram_mb"] != 768.0 {
				t.Fatalf("start after a stopped resize (a cold boot at the new size): %d %s", r.Status, r.Body)
			}
			if n := nproc(); n != cpus {
				t.Errorf("nproc after a cold boot at 2 cpus = %s", n)
			}
			if mb := memMB(); mb > 768 || mb < 768-112 {
				t.Errorf("MemTotal after a cold boot at 768 MB = %d MB", mb)
			}
		})
	}
}

// hostClass is the runtime class name of GET /v1/hosts' first host.
func hostClass(t *testing.T, c *client, name string) map[string]any {
	t.Helper()
	r := c.do("GET", "/v1/hosts", nil)
	rows, _ := r.JSON()["rows"].([]any)
	if len(rows) == 0 {
		t.Fatalf("hosts: %d %s", r.Status, r.Body)
	}
	for _, cl := range rows[0].(map[string]any)["runtime_classes"].([]any) {
		if m := cl.(map[string]any); m["name"] == name {
			return m
		}
	}
	t.Fatalf("hosts: no class %s: %s", name, r.Body)
	return nil
}
