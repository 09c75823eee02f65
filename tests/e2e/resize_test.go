package e2e

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// memLimit reads the sandbox's own memory limit from its cgroup (v1 or v2).
func memLimit(t *testing.T, c *client, id string) int64 {
	t.Helper()
	out := c.mustSh(id, "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max")
	n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("memory limit %q: %v", out, err)
	}
	return n
}

// memUsed reads what the sandbox's cgroup charges now (v1 or v2).
// memAnon is the sandbox's anonymous memory (what it cannot free without
// swap), from its cgroup's memory.stat: usage would count page cache too,
// which a shrink simply reclaims.
func memAnon(t *testing.T, c *client, id string) int64 {
	t.Helper()
	out := c.mustSh(id, "grep -E '^(total_rss|anon) ' /sys/fs/cgroup/memory/memory.stat 2>/dev/null || grep '^anon ' /sys/fs/cgroup/memory.stat")
	f := strings.Fields(out)
	if len(f) < 2 {
		t.Fatalf("memory.stat: %q", out)
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatalf("memory.stat %q: %v", out, err)
	}
	return n
}

func memTotalKB(t *testing.T, c *client, id string) int64 {
	t.Helper()
	f := strings.Fields(c.mustSh(id, "grep MemTotal /proc/meminfo"))
	if len(f) < 2 {
		t.Fatalf("no MemTotal in /proc/meminfo")
	}
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n
}

func diskKB(t *testing.T, c *client, id string) int64 {
	t.Helper()
	f := strings.Fields(strings.Split(strings.TrimSpace(c.mustSh(id, "df -k / | tail -1")), "\n")[0])
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n
}

// resizeGVisor: gVisor fixes the CPU count and memory its guest sees at
// boot, so a running gvisor sandbox's cpu/ram resize — up, down, or past
// the headroom — is 409 sandbox_not_resizable with the reason and the
// stop-then-resize hint, the record keeps what the guest has, the guest
// keeps its size and its processes.
func resizeGVisor(t *testing.T, c *client) {
	id := c.create(map[string]any{"template": "busybox", "runtime": "gvisor", "cpu": 1, "ram_mb": 256, "disk_gb": 1})
	if out := strings.TrimSpace(c.mustSh(id, "nproc")); out != "1" {
		t.Errorf("nproc inside a 1-cpu sandbox = %s", out)
	}
	if kb := memTotalKB(t, c, id); kb != 256*1024 {
		t.Errorf("MemTotal inside a 256 MB sandbox = %d kB", kb)
	}
	c.mustSh(id, "sleep 600 </dev/null >/dev/null 2>&1 &")
	for _, body := range []map[string]any{{"cpu": 2, "ram_mb": 512}, {"ram_mb": 512}, {"cpu": 2}, {"ram_mb": 128}, {"cpu": 32}} {
		r := c.do("POST", "/v1/sandboxes/"+id+"/resize", body)
		m := r.JSON()
		lr, _ := m["live_resize"].(map[string]any)
		hint, _ := m["hint"].(map[string]any)
		if r.Status != 409 || m["code"] != "sandbox_not_resizable" || lr == nil || lr["supported"] != false || hint == nil || hint["action"] != "stop_then_resize" {
			t.Errorf("live resize %v of a gvisor sandbox: %d %s", body, r.Status, r.Body)
		}
	}
	if g := c.do("GET", "/v1/sandboxes/"+id, nil).JSON(); g["cpu"] != 1.0 || g["ram_mb"] != 256.0 {
		t.Errorf("record after refused resizes: cpu %v ram_mb %v", g["cpu"], g["ram_mb"])
	}
	if out, kb := strings.TrimSpace(c.mustSh(id, "nproc")), memTotalKB(t, c, id); out != "1" || kb != 256*1024 {
		t.Errorf("guest after refused resizes: nproc %s, MemTotal %d kB", out, kb)
	}
	if out := c.mustSh(id, "pidof sleep"); strings.TrimSpace(out) == "" {
		t.Error("processes did not survive a refused resize")
	}
	resizeDiskAndStopped(t, c, id, "gvisor")
}

// TestResize runs the resize contract on both classes (see resizeRunc and
// resizeGVisor): live where the guest can see it, 409 where it cannot; the
// disk grows online on both; a stopped resize boots cold at the new size.
func TestResize(t *testing.T) {
	eachRuntime(t, func(t *testing.T, c *client, class string) {
		if class == "gvisor" {
			resizeGVisor(t, c)
			return
		}
		resizeRunc(t, c)
	})
}

// resizeRunc: a running runc sandbox changes cpu and ram_mb live and its
// guest sees it; memory it cannot free keeps a shrink partial.
func resizeRunc(t *testing.T, c *client) {
	id := c.create(map[string]any{"template": "busybox", "runtime": "runc", "cpu": 1, "ram_mb": 256, "disk_gb": 1})
	if got := memLimit(t, c, id); got != 256<<20 {
		t.Fatalf("boot memory limit %d", got)
	}
	// The sandbox sees its own size: nproc (cpuset) and /proc/meminfo (LXCFS).
	if out := strings.TrimSpace(c.mustSh(id, "nproc")); out != "1" {
		t.Errorf("nproc inside a 1-cpu sandbox = %s", out)
	}
	if kb := memTotalKB(t, c, id); kb != 256*1024 {
		t.Errorf("MemTotal inside a 256 MB sandbox = %d kB", kb)
	}
	c.mustSh(id, "sleep 600 </dev/null >/dev/null 2>&1 &")
	r := c.do("POST", "/v1/sandboxes/"+id+"/resize", map[string]any{"cpu": 2, "ram_mb": 512})
	m := r.JSON()
	if r.Status != 200 || m["applies_at"] != "now" || m["ram_mb"] != 512.0 || m["cpu"] != 2.0 || m["partial"] != false {
		t.Fatalf("live resize: %d %s", r.Status, r.Body)
	}
	live, _ := m["live"].(map[string]any)
	if live == nil || live["max_cpu"] == nil || live["max_ram_mb"] == nil {
		t.Fatalf("live headroom missing: %s", r.Body)
	}
	if got := memLimit(t, c, id); got != 512<<20 {
		t.Errorf("memory limit after resize %d", got)
	}
	if out := strings.TrimSpace(c.mustSh(id, "nproc")); out != strconv.Itoa(min(2, runtime.NumCPU())) {
		t.Errorf("nproc after resize to 2 cpus = %s", out)
	}
	if kb := memTotalKB(t, c, id); kb != 512*1024 {
		t.Errorf("MemTotal after resize to 512 MB = %d kB", kb)
	}
	// The answer's guest view is what nproc and /proc/meminfo say inside.
	nproc, _ := strconv.Atoi(strings.TrimSpace(c.mustSh(id, "nproc")))
	if live["guest_cpus_online"] != float64(nproc) || live["guest_mem_total_mb"] != float64(memTotalKB(t, c, id)/1024) {
		t.Errorf("live %v, inside: nproc %d, MemTotal %d kB", live, nproc, memTotalKB(t, c, id))
	}
	if out := c.mustSh(id, "pidof sleep"); strings.TrimSpace(out) == "" {
		t.Error("processes did not survive a live resize")
	}
	// Memory the sandbox cannot free (anonymous, no swap) stays: a shrink
	// to the boot size answers partial with what it still has.
	// 30 strings of 10 MB: one string of 300 MB would pass through twice
	// that (format buffer and copy) and be OOM-killed under the 512 MB limit.
	c.mustSh(id, `awk 'BEGIN { for (i = 0; i < 30; i++) s[i] = sprintf("%10000000s", i); system("sleep 600") }' </dev/null >/dev/null 2>&1 &`)
	for i := 0; memAnon(t, c, id) < 280<<20; i++ { // 286 MiB of strings, well over the 256 MB asked for
		if i == 1200 {
			t.Fatalf("the sandbox never held 280 MiB of anonymous memory: %s", c.mustSh(id, "ps; grep -E '^(total_rss|anon) ' /sys/fs/cgroup/memory/memory.stat"))
		}
		sleep(50)
	}
	r = c.do("POST", "/v1/sandboxes/"+id+"/resize", map[string]any{"ram_mb": 256})
	if m := r.JSON(); r.Status != 200 || m["ram_mb"] != 512.0 || m["partial"] != true {
		t.Errorf("shrink below what the sandbox uses: %d %s (anon now %d, awk %q)", r.Status, r.Body, memAnon(t, c, id), c.mustSh(id, "pidof awk || true"))
	}
	if got := memLimit(t, c, id); got != 512<<20 {
		t.Errorf("memory limit after a partial shrink %d", got)
	}
	c.mustSh(id, "kill $(pidof awk); while pidof awk >/dev/null; do sleep 0.1; done")
	// Below the boot size: only back down to it, and partial says so.
	r = c.do("POST", "/v1/sandboxes/"+id+"/resize", map[string]any{"ram_mb": 128})
	if m := r.JSON(); r.Status != 200 || m["ram_mb"] != 256.0 || m["partial"] != true {
		t.Errorf("shrink below boot: %d %s", r.Status, r.Body)
	}
	// Beyond the headroom: 409 with the stop-then-resize hint.
	r = c.do("POST", "/v1/sandboxes/"+id+"/resize", map[string]any{"cpu": 32})
	m = r.JSON()
	if r.Status != 409 || m["code"] != "sandbox_not_resizable" || m["hint"] == nil || m["live_resize"].(map[string]any)["supported"] != false {
		t.Errorf("beyond headroom: %d %s", r.Status, r.Body)
	}
	resizeDiskAndStopped(t, c, id, "runc")
}

// resizeDiskAndStopped is what both classes share: the disk grows online
// and the guest's df sees it at once; bad bodies are 400; a stopped resize
// is recorded and the next (cold) start boots at the new size, which the
// guest sees.
func resizeDiskAndStopped(t *testing.T, c *client, id, class string) {
	// Disk grows online; the guest sees it.
	before := diskKB(t, c, id)
	r := c.do("POST", "/v1/sandboxes/"+id+"/resize", map[string]any{"disk_gb": 2})
	if r.Status != 200 || r.JSON()["disk_gb"] != 2.0 {
		t.Fatalf("disk grow: %d %s", r.Status, r.Body)
	}
	if after := diskKB(t, c, id); after < before+900*1024 {
		t.Errorf("df did not grow: %d → %d KB", before, after)
	}
	for _, body := range []string{`{"disk_gb":1}`, `{"disk_gb":3,"cpu":2}`, `{}`, `{"cpu":0}`} {
		if r := c.do("POST", "/v1/sandboxes/"+id+"/resize", body); r.Status != 400 || r.JSON()["code"] != "invalid_request" {
			t.Errorf("resize %s: %d %s", body, r.Status, r.Body)
		}
	}
	// Stopped: recorded, and the next (cold) start boots at the new size.
	c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil)
	r = c.do("POST", "/v1/sandboxes/"+id+"/resize", map[string]any{"ram_mb": 768})
	if r.Status != 200 || r.JSON()["applies_at"] != "next_start" {
		t.Fatalf("stopped resize: %d %s", r.Status, r.Body)
	}
	r = c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil)
	if r.JSON()["restore"] != "disk_only" {
		t.Errorf("start after a stopped resize should be a cold boot: %s", r.Body)
	}
	if class == "runc" {
		if got := memLimit(t, c, id); got != 768<<20 {
			t.Errorf("memory limit after cold boot %d", got)
		}
	}
	if kb := memTotalKB(t, c, id); kb != 768*1024 {
		t.Errorf("MemTotal after a cold boot at 768 MB = %d kB", kb)
	}
}

func TestMetricsAndUsage(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox", "ram_mb": 256})
	c.mustSh(id, "head -c 50000000 /dev/zero > /root/f")
	r := c.do("GET", "/v1/sandboxes/"+id+"/metrics", nil)
	m := r.JSON()
	if r.Status != 200 || m["memory_limit_bytes"] != float64(256<<20) || m["disk_used_bytes"].(float64) < 50e6 || m["pids"].(float64) < 1 {
		t.Errorf("metrics: %d %s", r.Status, r.Body)
	}
	r = c.do("GET", "/v1/sandboxes/"+id+"/usage", nil)
	if u := r.JSON(); r.Status != 200 || u["cpu_seconds"].(float64) <= 0 || u["storage_gb_hours"] != 0.0 {
		t.Errorf("usage: %d %s", r.Status, r.Body)
	}
	if r := c.do("GET", "/v1/sandboxes/"+id+"/usage?from=yesterday", nil); r.Status != 400 {
		t.Errorf("bad from: %d", r.Status)
	}
}
