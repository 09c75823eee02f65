package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func counter(t *testing.T, c *client, id string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(c.mustSh(id, "cat /tmp/count")))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStopStartKeepsProcesses: a warm stop freezes the sandbox; start
// thaws it and a counter process keeps counting from where it was.
func TestStopStartKeepsProcesses(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})
	c.mustSh(id, `(i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done) </dev/null >/dev/null 2>&1 &`)
	c.mustSh(id, "echo kept > /root/file")
	sleep(300)

	r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil)
	if r.Status != 200 || r.JSON()["state"] != "stopped" {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
	// One host: its disk is only here, and the record says so.
	if got := r.JSON()["starts_on"]; got != "own_host" {
		t.Errorf("a stopped sandbox of one host: starts_on %v, want own_host", got)
	}
	// Idempotent; exec refused while stopped, naming the state.
	if r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); r.Status != 200 || r.JSON()["state"] != "stopped" {
		t.Errorf("second stop: %d %s", r.Status, r.Body)
	}
	if r := c.do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": "true"}); r.Status != 409 || r.JSON()["state"] != "stopped" {
		t.Errorf("exec while stopped: %d %s", r.Status, r.Body)
	}
	sleep(300)
	r = c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil)
	m := r.JSON()
	if r.Status != 200 || m["state"] != "running" || m["restore"] != "memory" || m["ram_restored"] != true {
		t.Fatalf("start: %d %s", r.Status, r.Body)
	}
	if md, _ := m["metadata"].(map[string]any); md == nil || !strings.Contains(md["last_start"].(string), `"restore":"memory"`) {
		t.Errorf("metadata.last_start missing: %s", r.Body)
	}
	before := counter(t, c, id)
	sleep(300)
	after := counter(t, c, id)
	if after <= before {
		t.Errorf("counter stopped counting after a warm start: %d → %d", before, after)
	}
	if out := c.mustSh(id, "cat /root/file"); out != "kept\n" {
		t.Errorf("file after start: %q", out)
	}
	if r := c.do("POST", "/v1/sandboxes/"+id+"/resume?wait_for_state=running", nil); r.Status != 200 || r.JSON()["state"] != "running" {
		t.Errorf("resume on running: %d %s", r.Status, r.Body)
	}
}

// TestArchiveRequiresStopped: archive of a running sandbox is 409 with its state.
func TestArchiveRequiresStopped(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})
	r := c.do("POST", "/v1/sandboxes/"+id+"/archive", nil)
	if r.Status != 409 || r.JSON()["state"] != "running" {
		t.Errorf("archive running: %d %s", r.Status, r.Body)
	}
}

// TestArchiveRoundTrip: archive frees the local disk; start unarchives and
// the files come back byte-identical (a 200 MB file's checksum).
func TestArchiveRoundTrip(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox", "disk_gb": 1, "env": map[string]string{"KEPT_ENV": "same"}})
	sum := c.mustSh(id, "head -c 200000000 /dev/urandom > /root/big && sha256sum /root/big | cut -d' ' -f1")
	addr := c.mustSh(id, "ip -4 -o addr | grep -v ' lo ' | awk '{print $4}'")
	if r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); r.Status != 200 {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
	// Through the CLI, as a user would: it waits and shows progress.
	if _, errOut, code := pt(t, nil, "sandbox", "archive", id, "--wait", "--timeout", "2m"); code != 0 || !strings.Contains(errOut, "archived") {
		t.Fatalf("pt sandbox archive --wait: %d %s", code, errOut)
	}
	if r := c.do("GET", "/v1/sandboxes/"+id, nil); r.JSON()["state"] != "archived" {
		t.Fatalf("after archive: %s", r.Body)
	}
	img := filepath.Join(env.dataDir, "disks", "pool", "images", id+".img")
	if _, err := os.Stat(img); !os.IsNotExist(err) {
		t.Errorf("local disk image still there after archive: %v", err)
	}
	// Stopped only: archiving an archived sandbox is a 409 naming its state.
	if r := c.do("POST", "/v1/sandboxes/"+id+"/archive", nil); r.Status != 409 || r.JSON()["state"] != "archived" || r.JSON()["code"] != "conflict" {
		t.Errorf("archive again: %d %s", r.Status, r.Body)
	}
	r := c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running&wait_timeout_ms=120000", nil)
	if r.Status != 200 || r.JSON()["state"] != "running" || r.JSON()["restore"] != "disk_only" {
		t.Fatalf("start from archive: %d %s", r.Status, r.Body)
	}
	if got := c.mustSh(id, "sha256sum /root/big | cut -d' ' -f1"); got != sum {
		t.Errorf("checksum after archive round trip: %q, want %q", got, sum)
	}
	// The same sandbox came back: same address, same env (a cold boot).
	if got := c.mustSh(id, "ip -4 -o addr | grep -v ' lo ' | awk '{print $4}'"); got != addr || addr == "" {
		t.Errorf("address after archive round trip: %q, want %q", got, addr)
	}
	if got := c.mustSh(id, `echo "$KEPT_ENV"`); got != "same\n" {
		t.Errorf("env after archive round trip: %q", got)
	}
	// Start of an archived sandbox unarchives first: restoring → starting → running.
	var path []string
	for _, e := range rowsOf(t, c, "/v1/events?format=json&type=state_changed&limit=500&sandbox_id="+id) {
		if d, _ := e["data"].(map[string]any); d != nil {
			path = append(path, fmt.Sprint(d["from"], "→", d["to"]))
		}
	}
	if got := strings.Join(path, " "); !strings.Contains(got, "archived→restoring restoring→starting starting→running") {
		t.Errorf("state changes of the archived start: %s", got)
	}
}
