package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// gvisorState lists the runsc containers of the test ptd (its gvisor
// class's state root).
func gvisorState(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("runsc", "--root", filepath.Join(env.dataDir, "runtime-gvisor"), "list", "--quiet").CombinedOutput()
	if err != nil {
		t.Fatalf("runsc list: %v: %s", err, out)
	}
	return string(out)
}

// startGVisorWorkload starts, in a gVisor sandbox, a counter (its value
// lives only in the shell's memory and is mirrored to /tmp/count), a TCP
// server on 8080 and a process holding /tmp/held open on fd 3, and writes
// a file in /tmp and one on the disk. It returns the counter's and the
// holder's pids.
func startGVisorWorkload(t *testing.T, c *client, id, token string) (counterPid, holderPid string) {
	t.Helper()
	c.mustSh(id, `(i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done) </dev/null >/dev/null 2>&1 & echo $! > /tmp/counter.pid`)
	c.mustSh(id, "mkdir -p /www && echo "+token+" > /www/index.html && httpd -p 8080 -h /www")
	c.mustSh(id, "echo "+token+" > /tmp/held && echo "+token+" > /tmp/tmpfile && echo "+token+" > /root/diskfile")
	c.mustSh(id, `(exec 3</tmp/held; while true; do sleep 1; done) </dev/null >/dev/null 2>&1 & echo $! > /tmp/holder.pid`)
	sleep(300)
	if got := httpGet(t, c, id); got != token {
		t.Fatalf("TCP server on 8080 before any stop: %q", got)
	}
	return strings.TrimSpace(c.mustSh(id, "cat /tmp/counter.pid")), strings.TrimSpace(c.mustSh(id, "cat /tmp/holder.pid"))
}

// httpGet asks the sandbox's own HTTP server on 8080 for / with a client
// exec'd inside the sandbox, and returns the body.
func httpGet(t *testing.T, c *client, id string) string {
	t.Helper()
	out := c.sh(id, `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 127.0.0.1 8080`).Stdout
	if _, body, ok := strings.Cut(out, "\r\n\r\n"); ok {
		return strings.TrimSpace(body)
	}
	return out
}

// TestGVisorStopStartKeepsMemoryFiveCycles: each stop of a gVisor sandbox
// checkpoints it to its own directory and frees its RAM (no runsc
// sandbox left), each start restores it (restore "memory"): the counter
// keeps counting from where it was, the TCP server still answers on the
// same port, the open descriptor, /tmp and the disk are intact, and an env
// patched while stopped is what new execs see. Five cycles in a row.
func TestGVisorStopStartKeepsMemoryFiveCycles(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox", "runtime": "gvisor"})
	token := randHex(8)
	counterPid, holderPid := startGVisorWorkload(t, c, id, token)
	last := counter(t, c, id)
	for cycle := 1; cycle <= 5; cycle++ {
		r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil)
		if r.Status != 200 || r.JSON()["state"] != "stopped" {
			t.Fatalf("cycle %d: stop: %d %s", cycle, r.Status, r.Body)
		}
		if strings.Contains(gvisorState(t), id) {
			t.Errorf("cycle %d: the runsc sandbox still exists after a stop with memory", cycle)
		}
		if _, err := os.Stat(filepath.Join(env.dataDir, "sandboxes", id, "checkpoint.json")); err != nil {
			t.Errorf("cycle %d: no checkpoint in the sandbox's directory: %v", cycle, err)
		}
		val := "v" + strconv.Itoa(cycle)
		if r := c.do("PATCH", "/v1/sandboxes/"+id+"/env", `{"env":{"CYCLE":"`+val+`"}}`); r.Status != 200 {
			t.Fatalf("cycle %d: env patch while stopped: %d %s", cycle, r.Status, r.Body)
		}
		r = c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil)
		m := r.JSON()
		if r.Status != 200 || m["state"] != "running" || m["restore"] != "memory" || m["ram_restored"] != true {
			t.Fatalf("cycle %d: start: %d %s", cycle, r.Status, r.Body)
		}
		if md, _ := m["metadata"].(map[string]any); md == nil || !strings.Contains(md["last_start"].(string), `"restore":"memory"`) {
			t.Errorf("cycle %d: metadata.last_start: %s", cycle, r.Body)
		}
		if out := c.mustSh(id, "cat /tmp/counter.pid /tmp/holder.pid"); out != counterPid+"\n"+holderPid+"\n" {
			t.Errorf("cycle %d: pids %q, want %s and %s", cycle, out, counterPid, holderPid)
		}
		now := counter(t, c, id)
		if now < last {
			t.Errorf("cycle %d: counter went back from %d to %d: the process started over", cycle, last, now)
		}
		sleep(200)
		if later := counter(t, c, id); later <= now {
			t.Errorf("cycle %d: counter stopped at %d after the restore", cycle, now)
		} else {
			last = later
		}
		if out := c.mustSh(id, "kill -0 "+counterPid+" && kill -0 "+holderPid+" && cat /proc/"+holderPid+"/fd/3 /tmp/tmpfile /root/diskfile"); out != strings.Repeat(token+"\n", 3) {
			t.Errorf("cycle %d: open file, /tmp and disk: %q", cycle, out)
		}
		if got := httpGet(t, c, id); got != token {
			t.Errorf("cycle %d: TCP server on 8080 answered %q", cycle, got)
		}
		if out := c.mustSh(id, "echo $CYCLE"); out != val+"\n" {
			t.Errorf("cycle %d: env CYCLE = %q, want %s (patched while stopped)", cycle, out, val)
		}
	}
}

// TestGVisorFailedRestoreBootsFromDisk: a checkpoint image that is corrupt
// or gone makes the start a cold boot from the same disk that says so
// (restore "disk_only", the reason in metadata.last_start), never a stuck
// sandbox; the next stop/start keeps memory again.
func TestGVisorFailedRestoreBootsFromDisk(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		spoil        func(t *testing.T, dir string)
	}{
		{"corrupt", "memory restore failed", func(t *testing.T, dir string) {
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) == 0 {
				t.Fatalf("checkpoint image: %v %v", entries, err)
			}
			for _, e := range entries {
				if err := os.WriteFile(filepath.Join(dir, e.Name()), []byte("not a checkpoint "+randHex(64)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"removed", "memory image written at stop is missing", func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t)
			id := c.create(map[string]any{"template": "busybox", "runtime": "gvisor"})
			token := randHex(8)
			startGVisorWorkload(t, c, id, token)
			if r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); r.JSON()["state"] != "stopped" {
				t.Fatalf("stop: %d %s", r.Status, r.Body)
			}
			tc.spoil(t, filepath.Join(env.dataDir, "sandboxes", id, "checkpoint"))
			r := c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running&wait_timeout_ms=120000", nil)
			m := r.JSON()
			if r.Status != 200 || m["state"] != "running" || m["restore"] != "disk_only" || m["ram_restored"] != false {
				t.Fatalf("start: %d %s", r.Status, r.Body)
			}
			md, _ := m["metadata"].(map[string]any)
			if ls, _ := md["last_start"].(string); !strings.Contains(ls, tc.reason) {
				t.Errorf("metadata.last_start = %q, want the reason %q", ls, tc.reason)
			}
			if out := c.mustSh(id, "cat /root/diskfile /tmp/tmpfile"); out != token+"\n"+token+"\n" {
				t.Errorf("disk after a cold boot: %q", out)
			}
			if out := c.mustSh(id, "pidof httpd || echo none"); out != "none\n" {
				t.Errorf("a cold boot kept processes: %q", out)
			}
			// The next cycle keeps memory again.
			c.mustSh(id, `sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > /tmp/sleeper`)
			c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil)
			r = c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil)
			if r.JSON()["restore"] != "memory" {
				t.Fatalf("start after a recovered failure: %d %s", r.Status, r.Body)
			}
			c.mustSh(id, "kill -0 $(cat /tmp/sleeper)")
		})
	}
}

// TestGVisorLiveResizeChangesNothing: a running gVisor sandbox cannot
// resize cpu or ram_mb live (gVisor fixes its guest's size at boot), so
// the refused resize leaves the host's limits too where they were: the
// host cgroup still holds the boot limit, and its processes live on.
func TestGVisorLiveResizeChangesNothing(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox", "runtime": "gvisor", "cpu": 1, "ram_mb": 256})
	c.mustSh(id, "sleep 600 </dev/null >/dev/null 2>&1 &")
	dirs, _ := filepath.Glob("/sys/fs/cgroup/memory/platinum-test-*/" + id)
	if len(dirs) == 0 {
		dirs, _ = filepath.Glob("/sys/fs/cgroup/platinum-test-*/" + id)
	}
	if len(dirs) != 1 {
		t.Fatalf("host memory cgroup of %s: %v", id, dirs)
	}
	limit := func() int64 {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dirs[0], "memory.limit_in_bytes"))
		if err != nil {
			b, err = os.ReadFile(filepath.Join(dirs[0], "memory.high"))
		}
		n, perr := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || perr != nil {
			t.Fatalf("host memory limit: %q %v %v", b, err, perr)
		}
		return n
	}
	// The host cgroup holds the sandbox's 256 MB plus the Sentry's own
	// overhead (internal/runtime/oci/gvisor.go), and no more than twice it.
	boot := limit()
	if boot <= 256<<20 || boot > 512<<20 {
		t.Errorf("host memory limit of a 256 MB gvisor sandbox: %d", boot)
	}
	r := c.do("POST", "/v1/sandboxes/"+id+"/resize", map[string]any{"cpu": 2, "ram_mb": 512})
	if m := r.JSON(); r.Status != 409 || m["code"] != "sandbox_not_resizable" {
		t.Fatalf("live resize: %d %s", r.Status, r.Body)
	}
	if got := limit(); got != boot {
		t.Errorf("host memory limit after a refused resize: %d, want the boot limit %d", got, boot)
	}
	if out := c.mustSh(id, "pidof sleep"); strings.TrimSpace(out) == "" {
		t.Error("processes did not survive a refused resize")
	}
}
