package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestLifecycle(t *testing.T) {
	for _, tpl := range []string{"busybox", "pt-base"} {
		t.Run(tpl, func(t *testing.T) {
			c := newClient(t)
			ensureTemplate(t, c, tpl)
			id := c.create(map[string]any{"template": tpl, "cpu": 1, "ram_mb": 256, "disk_gb": 1,
				"name": "e2e-" + tpl, "env": map[string]string{"GREETING": "hello"}, "metadata": map[string]string{"suite": "e2e"}})

			got := c.do("GET", "/v1/sandboxes/"+id, nil)
			if got.Status != 200 {
				t.Fatalf("get: %d %s", got.Status, got.Body)
			}
			rec := got.JSON()
			if rec["template"] != tpl || rec["name"] != "e2e-"+tpl || rec["template_version_id"] == nil {
				t.Errorf("record = %s", got.Body)
			}
			if bytes.Contains(got.Body, []byte("hello")) {
				t.Errorf("record leaks an env value: %s", got.Body)
			}

			// exec: argv form, shell form, env from create, exit codes, stderr, cwd, stdin.
			r := c.do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": []string{"echo", "a b"}})
			var res execResult
			json.Unmarshal(r.Body, &res)
			if r.Status != 200 || res.Stdout != "a b\n" || res.ExitCode != 0 {
				t.Fatalf("exec argv: %d %s", r.Status, r.Body)
			}
			if out := c.mustSh(id, `echo "$GREETING $EXTRA"; pwd`); out != "hello \n/root\n" {
				t.Errorf("shell env/cwd: %q", out)
			}
			r = c.do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": "echo err >&2; exit 7", "env": map[string]string{"EXTRA": "x"}})
			json.Unmarshal(r.Body, &res)
			if res.ExitCode != 7 || res.Stderr != "err\n" {
				t.Errorf("exit/stderr: %s", r.Body)
			}
			r = c.do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": "cat; pwd", "stdin": "in\n", "cwd": "/tmp"})
			json.Unmarshal(r.Body, &res)
			if res.Stdout != "in\n/tmp\n" {
				t.Errorf("stdin/cwd: %s", r.Body)
			}
			r = c.do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": "sleep 30", "timeout_ms": 300})
			json.Unmarshal(r.Body, &res)
			if !res.TimedOut {
				t.Errorf("timeout: %s", r.Body)
			}
			// pt-base is Debian bookworm; busybox is busybox-static's.
			if tpl == "pt-base" {
				if out := c.mustSh(id, ". /etc/os-release; echo $ID $VERSION_CODENAME"); out != "debian bookworm\n" {
					t.Errorf("pt-base is %q, want debian bookworm", out)
				}
			} else if out := c.mustSh(id, "readlink -f /bin/sh; busybox 2>&1 | head -1"); !strings.Contains(out, "BusyBox") {
				t.Errorf("busybox template: %q", out)
			}
			// The hostname is the sandbox id.
			if out := strings.TrimSpace(c.mustSh(id, "hostname")); out != id {
				t.Errorf("hostname = %q, want %q", out, id)
			}

			// Files: upload 5 MB of binary data, download it back byte-identical.
			data := make([]byte, 5<<20)
			for i := range data {
				data[i] = byte(i*7 + i/251)
			}
			r = c.do("PUT", "/v1/sandboxes/"+id+"/files?path=/root/dir/blob.bin", data)
			if r.Status != 200 {
				t.Fatalf("upload: %d %s", r.Status, r.Body)
			}
			r = c.do("GET", "/v1/sandboxes/"+id+"/files?path=/root/dir/blob.bin", nil)
			if r.Status != 200 || sha256.Sum256(r.Body) != sha256.Sum256(data) {
				t.Fatalf("download: %d, %d bytes", r.Status, len(r.Body))
			}
			if out := c.mustSh(id, "wc -c < /root/dir/blob.bin"); strings.TrimSpace(out) != fmt.Sprint(len(data)) {
				t.Errorf("size inside = %q", out)
			}
			r = c.do("GET", "/v1/sandboxes/"+id+"/files?path=/root/dir", nil)
			if r.Status != 200 || !strings.Contains(string(r.Body), `"name":"blob.bin"`) {
				t.Errorf("dir listing: %d %s", r.Status, r.Body)
			}
			r = c.do("POST", "/v1/sandboxes/"+id+"/files/mkdir", map[string]any{"path": "/root/new/sub"})
			if r.Status != 200 || r.JSON()["created"] != true {
				t.Errorf("mkdir: %d %s", r.Status, r.Body)
			}
			if r = c.do("DELETE", "/v1/sandboxes/"+id+"/files?path=/root/dir", nil); r.Status != 204 {
				t.Errorf("remove: %d %s", r.Status, r.Body)
			}
			if r = c.do("GET", "/v1/sandboxes/"+id+"/files?path=/root/dir/blob.bin", nil); r.Status != 404 {
				t.Errorf("removed file: %d %s", r.Status, r.Body)
			}

			// List shows it, newest first.
			r = c.do("GET", "/v1/sandboxes?state=running&limit=200", nil)
			if r.Status != 200 || !strings.Contains(string(r.Body), id) {
				t.Errorf("list: %d %s", r.Status, r.Body)
			}

			// Delete answers at once; the record ends deleted; GET says 404.
			netns, cgroup := hostResources(t, id)
			if left := hostLeftovers(t, id, netns, cgroup); len(left) == 0 {
				t.Fatalf("a running sandbox shows nothing on the host (the check below could not fail)")
			}
			r = c.do("DELETE", "/v1/sandboxes/"+id, nil)
			if r.Status != 202 || r.JSON()["state"] != "deleting" {
				t.Fatalf("delete: %d %s", r.Status, r.Body)
			}
			waitState(t, c, id, "deleted")
			if r = c.do("GET", "/v1/sandboxes/"+id, nil); r.Status != 404 || r.JSON()["code"] != "not_found" {
				t.Errorf("get deleted: %d %s", r.Status, r.Body)
			}
			if _, err := os.Stat(env.dataDir + "/sandboxes/" + id); !os.IsNotExist(err) {
				t.Errorf("sandbox dir still on the host: %v", err)
			}
			// Teardown removed every namespace, mount, cgroup and loop device.
			if left := hostLeftovers(t, id, netns, cgroup); len(left) > 0 {
				t.Errorf("deleted sandbox left on the host:\n%s", strings.Join(left, "\n"))
			}
		})
	}
}

func waitState(t *testing.T, c *client, id, state string) {
	t.Helper()
	for i := 0; i < 600; i++ {
		r := c.do("GET", "/v1/sandboxes/"+id+"?include_deleted=true", nil)
		if r.JSON()["state"] == state {
			return
		}
		sleep(50)
	}
	t.Fatalf("sandbox %s never reached %s", id, state)
}

// TestGuideCreateThenExec runs the guide's curl create example
// (docs/sandboxes.md) verbatim and runs a command in what it made.
func TestGuideCreateThenExec(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "pt-base")
	script := guideExample(t, "sandboxes.md#create")
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "PT_API_URL="+env.url, "PT_TOKEN="+env.token)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl: %v", err)
	}
	var rec map[string]any
	if err := json.Unmarshal(out, &rec); err != nil {
		t.Fatalf("curl output %q: %v", out, err)
	}
	id, _ := rec["id"].(string)
	if id != "" {
		t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
	}
	if rec["state"] != "running" || rec["cpu"] != 2.0 || rec["ram_mb"] != 1024.0 {
		t.Fatalf("the guide's create answered %s", out)
	}
	if got := c.mustSh(id, "nproc >/dev/null && echo ok"); got != "ok\n" {
		t.Errorf("exec in the sandbox: %q", got)
	}
}
