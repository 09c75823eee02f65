package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// sandboxLeftovers lists what sandbox id still holds on the host, looked for
// on the host itself: runtime state under either class's root, processes
// naming it or in its cgroup, mounts under its directory, loop devices on
// its image, its network namespace, its cgroups, its directory and image.
func sandboxLeftovers(t *testing.T, id string) []string {
	t.Helper()
	var out []string
	for _, root := range []string{"runtime", "runtime-gvisor"} {
		if m, _ := filepath.Glob(filepath.Join(env.dataDir, root, "*"+id+"*")); len(m) > 0 {
			out = append(out, "runtime state "+strings.Join(m, " "))
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cmd, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		cg, _ := os.ReadFile(filepath.Join(p, "cgroup"))
		if strings.Contains(string(cmd), id) || strings.Contains(string(cg), "/"+id) {
			out = append(out, "process "+filepath.Base(p)+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, "/sandboxes/"+id+"/") || strings.Contains(line, "/sandboxes/"+id+" ") {
			out = append(out, "mount "+line)
		}
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, l := range loops {
		if b, _ := os.ReadFile(l); strings.Contains(string(b), id) {
			out = append(out, "loop device "+l+" on "+strings.TrimSpace(string(b)))
		}
	}
	sum := sha256.Sum256([]byte(env.bridge + "\x00" + id))
	if ns := "/run/netns/pt-" + hex.EncodeToString(sum[:6]); exists(ns) {
		out = append(out, "netns "+ns)
	}
	if m, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", env.cgroup, id)); len(m) > 0 {
		out = append(out, "cgroup "+strings.Join(m, " "))
	}
	if d := filepath.Join(env.dataDir, "sandboxes", id); exists(d) {
		out = append(out, "directory "+d)
	}
	if m, _ := filepath.Glob(filepath.Join(env.dataDir, "disks", "*", "images", id+".img")); len(m) > 0 {
		out = append(out, "image "+strings.Join(m, " "))
	}
	return out
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// waitNoLeftovers waits up to timeout for every id to hold nothing.
func waitNoLeftovers(t *testing.T, ids []string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var left []string
		for _, id := range ids {
			for _, l := range sandboxLeftovers(t, id) {
				left = append(left, id+": "+l)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the host still holds:\n%s", timeout, strings.Join(left, "\n"))
		}
		sleep(500)
	}
}

// orphanBundle writes an OCI bundle for id that runs a busybox sleep in
// the ptd's cgroup parent, as a sandbox's container would.
func orphanBundle(t *testing.T, runtime, id string) string {
	t.Helper()
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	for _, d := range []string{"bin", "proc", "dev", "sys", "tmp"} {
		os.MkdirAll(filepath.Join(rootfs, d), 0o755)
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(bb)
	os.WriteFile(filepath.Join(rootfs, "bin", "busybox"), b, 0o755)
	if out, err := exec.Command(runtime, "spec", "--bundle", dir).CombinedOutput(); err != nil {
		t.Fatalf("%s spec: %v %s", runtime, err, out)
	}
	var cfg map[string]any
	raw, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	json.Unmarshal(raw, &cfg)
	proc := cfg["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = []string{"/bin/busybox", "sleep", "100000"}
	linux := cfg["linux"].(map[string]any)
	linux["cgroupsPath"] = env.cgroup + "/" + id
	linux["resources"] = map[string]any{"memory": map[string]any{"limit": 128 << 20}}
	cfg["root"].(map[string]any)["readonly"] = false
	raw, _ = json.Marshal(cfg)
	os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644)
	return dir
}

// TestSweepRemovesOrphans plants what a crashed or timed-out runtime
// call leaves behind with no record owning it — a running runc container
// and a running runsc container under the data dir's state roots and the
// ptd's cgroup parent, and a mount under a sandbox directory — and sees
// the reconciler's periodic sweep remove all of it: processes, runtime
// state, cgroups, mounts and directories.
func TestSweepRemovesOrphans(t *testing.T) {
	newClient(t)
	runcID, runscID, mountID := sandbox.NewID(sandbox.PrefixSandbox), sandbox.NewID(sandbox.PrefixSandbox), sandbox.NewID(sandbox.PrefixSandbox)
	t.Cleanup(func() {
		exec.Command("runc", "--root", filepath.Join(env.dataDir, "runtime"), "delete", "-f", runcID).Run()
		exec.Command("runsc", "--root", filepath.Join(env.dataDir, "runtime-gvisor"), "delete", "-force", runscID).Run()
		mnt := filepath.Join(env.dataDir, "sandboxes", mountID, "rootfs")
		syscall.Unmount(mnt, syscall.MNT_DETACH)
		os.RemoveAll(filepath.Join(env.dataDir, "sandboxes", mountID))
		for _, id := range []string{runcID, runscID} {
			m, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", env.cgroup, id))
			for _, d := range m {
				os.Remove(d)
			}
		}
	})
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil // /dev/null: a detached init keeps them
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
	}
	run("runc", "--root", filepath.Join(env.dataDir, "runtime"), "run", "-d", "--bundle", orphanBundle(t, "runc", runcID), runcID)
	gv := []string{"--root", filepath.Join(env.dataDir, "runtime-gvisor"), "--platform=systrap", "--network=none", "--overlay2=none"}
	bundle := orphanBundle(t, "runsc", runscID)
	run("runsc", append(gv, "create", "--bundle", bundle, runscID)...)
	run("runsc", append(gv, "start", runscID)...)
	mnt := filepath.Join(env.dataDir, "sandboxes", mountID, "rootfs")
	os.MkdirAll(mnt, 0o700)
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{runcID, runscID, mountID} {
		if len(sandboxLeftovers(t, id)) == 0 {
			t.Fatalf("planted orphan %s is not on the host", id)
		}
	}
	// The reconciler runs every 30 s; its sweep follows its checks.
	waitNoLeftovers(t, []string{runcID, runscID, mountID}, 100*time.Second)
}

// TestBurstOfCreatesGVisor sends a burst of gVisor creates at once to this
// small host: every one ends running, or failed with a reason, within its
// wait (none is left creating), and once they are all deleted nothing of
// any of them is left on the host: no runsc process or state, mount, loop
// device, network namespace, cgroup, directory or image.
func TestBurstOfCreatesGVisor(t *testing.T) {
	c := newClient(t)
	const n = 24
	var (
		mu     sync.Mutex
		ids    []string
		states = map[string]int{}
		bad    []string
	)
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := c.do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=240000", map[string]any{"template": "busybox", "runtime": "gvisor"})
			m := r.JSON()
			mu.Lock()
			defer mu.Unlock()
			id, _ := m["id"].(string)
			if id != "" {
				ids = append(ids, id)
			}
			state, _ := m["state"].(string)
			states[state]++
			switch {
			case r.Status == 201 && state == "running":
			case state == "failed" && m["reason"] != nil:
				bad = append(bad, fmt.Sprintf("%s failed: %v", id, m["reason"]))
			default:
				bad = append(bad, fmt.Sprintf("%d %s", r.Status, r.Body))
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	t.Logf("%d gvisor creates at once: %v in %v", n, states, took.Round(time.Millisecond))
	if states["running"] != n {
		t.Errorf("%d of %d creates running: %v\n%s", states["running"], n, states, strings.Join(bad, "\n"))
	}
	for _, id := range ids {
		if r := c.do("DELETE", "/v1/sandboxes/"+id, nil); r.Status != 200 && r.Status != 202 {
			t.Errorf("delete %s: %d %s", id, r.Status, r.Body)
		}
	}
	for _, id := range ids {
		for i := 0; ; i++ {
			r := c.do("GET", "/v1/sandboxes/"+id+"?include_deleted=true", nil)
			if r.Status == 404 || r.JSON()["state"] == "deleted" {
				break
			}
			if i == 240 {
				t.Fatalf("%s not deleted after 2 min: %s", id, r.Body)
			}
			sleep(500)
		}
	}
	waitNoLeftovers(t, ids, 30*time.Second)
}
