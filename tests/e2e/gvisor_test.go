package e2e

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestGVisorClass runs a sandbox under runsc: exec, files, its own
// processes only (a user-space kernel), stop/start, delete.
func TestGVisorClass(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox", "runtime": "gvisor"})
	if r := c.do("GET", "/v1/sandboxes/"+id, nil); r.JSON()["runtime"] != "gvisor" {
		t.Fatalf("runtime: %s", r.Body)
	}
	// gVisor's user-space kernel answers uname, not the host's kernel.
	host, _ := exec.Command("uname", "-r").Output()
	if out := c.mustSh(id, "uname -r"); out == string(host) {
		t.Errorf("sandbox runs on the host kernel %q", out)
	}
	if out := c.mustSh(id, "echo hi > /root/f && cat /root/f && hostname"); out != "hi\n"+id+"\n" {
		t.Errorf("exec: %q", out)
	}
	if r := c.do("PUT", "/v1/sandboxes/"+id+"/files?path=/root/up", "payload"); r.Status != 200 {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	if r := c.do("GET", "/v1/sandboxes/"+id+"/files?path=/root/up", nil); string(r.Body) != "payload" {
		t.Errorf("download: %q", r.Body)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(c.mustSh(id, "ps -o pid,comm | wc -l"))); n > 6 {
		t.Errorf("sandbox sees %d processes", n-1)
	}
	if r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); r.Status != 200 {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
	if r := c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil); r.Status != 200 || r.JSON()["state"] != "running" {
		t.Fatalf("start: %d %s", r.Status, r.Body)
	}
	if out := c.mustSh(id, "cat /root/f"); out != "hi\n" {
		t.Errorf("file after stop/start: %q", out)
	}
	if r := c.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox", "runtime": "qemu"}); r.Status != 400 || r.JSON()["field"] != "runtime" {
		t.Errorf("unknown runtime: %d %s", r.Status, r.Body)
	}
}

// TestHostsReportsClasses: GET /v1/hosts says which classes run and which
// can keep memory on disk (runsc can; runc only with CRIU >= 4.1, which
// Debian 12 lacks, and then it says why).
func TestHostsReportsClasses(t *testing.T) {
	c := newClient(t)
	r := c.do("GET", "/v1/hosts", nil)
	if r.Status != 200 {
		t.Fatalf("hosts: %d %s", r.Status, r.Body)
	}
	rows := r.JSON()["rows"].([]any)
	classes := map[string]map[string]any{}
	for _, cl := range rows[0].(map[string]any)["runtime_classes"].([]any) {
		m := cl.(map[string]any)
		classes[m["name"].(string)] = m
	}
	if classes["runc"] == nil || classes["gvisor"] == nil {
		t.Fatalf("classes: %s", r.Body)
	}
	if classes["gvisor"]["checkpoint"] != true || classes["gvisor"]["stop_keeps_memory"] != "checkpoint" {
		t.Errorf("gvisor does not checkpoint on stop: %s", r.Body)
	}
	// runc: CRIU checkpoints where `criu check` passes (CRIU >= 4.1),
	// else the warm freeze, and it says why.
	switch runc := classes["runc"]; {
	case runc["checkpoint"] == true && runc["stop_keeps_memory"] != "checkpoint":
		t.Errorf("runc can checkpoint but a stop does not: %s", r.Body)
	case runc["checkpoint"] == false && (runc["stop_keeps_memory"] != "freeze" || runc["checkpoint_unavailable_reason"] == nil):
		t.Errorf("runc cannot checkpoint: want the warm freeze and the reason: %s", r.Body)
	}
}
