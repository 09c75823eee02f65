package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Every test here fails if the isolation it names breaks, and runs on
// every runtime class (eachRuntime).

// runtimeClasses are the classes every isolation test runs on.
var runtimeClasses = []string{"runc", "gvisor"}

// eachRuntime runs fn once per runtime class, as a subtest named after it.
func eachRuntime(t *testing.T, fn func(t *testing.T, c *client, class string)) {
	for _, class := range runtimeClasses {
		t.Run(class, func(t *testing.T) { fn(t, newClient(t), class) })
	}
}

func TestIsolationOwnProcessesOnly(t *testing.T) {
	eachRuntime(t, func(t *testing.T, c *client, class string) {
		id := c.create(map[string]any{"template": "busybox", "runtime": class})
		out := c.mustSh(id, "ps -o pid,comm")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) > 6 {
			t.Errorf("sandbox sees %d processes, want only its own:\n%s", len(lines)-1, out)
		}
		if !strings.Contains(out, "1 pt-agent") {
			t.Errorf("pid 1 is not the sandbox's agent:\n%s", out)
		}
		if strings.Contains(out, "ptd") {
			t.Errorf("sandbox sees ptd:\n%s", out)
		}
	})
}

func TestIsolationHostFilesInvisible(t *testing.T) {
	eachRuntime(t, func(t *testing.T, c *client, class string) {
		secret := "host-secret-" + randHex(8)
		f, err := os.CreateTemp("/var/tmp", "pt-e2e-secret-")
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(secret)
		f.Close()
		t.Cleanup(func() { os.Remove(f.Name()) })

		id := c.create(map[string]any{"template": "busybox", "runtime": class})
		res := c.sh(id, fmt.Sprintf("cat %s; grep -rs %s /etc /var /root /tmp /proc/1/root/var 2>/dev/null | head -1", f.Name(), secret))
		if strings.Contains(res.Stdout, secret) {
			t.Fatalf("sandbox read a host file: %q", res.Stdout)
		}
		// The host's own files are not there at all.
		if out := c.mustSh(id, "ls /var/tmp | grep -c pt-e2e-secret || true"); strings.TrimSpace(out) != "0" {
			t.Errorf("host's /var/tmp visible: %q", out)
		}
	})
}

func TestIsolationNoPrivilegedOperations(t *testing.T) {
	eachRuntime(t, func(t *testing.T, c *client, class string) {
		id := c.create(map[string]any{"template": "busybox", "runtime": class})
		for _, tc := range []struct{ name, script string }{
			{"mount", "mkdir -p /mnt/x && mount -t tmpfs none /mnt/x"},
			{"remount root", "mount -o remount,ro /"},
			{"proc sys write", "echo evil > /proc/sys/kernel/hostname"},
			{"ip_forward", "echo 1 > /proc/sys/net/ipv4/ip_forward"},
			{"load module", "head -c 4096 /dev/zero > /tmp/m.ko && insmod /tmp/m.ko"},
			{"mknod", "mknod /tmp/sda b 8 0"},
			{"sysrq", "echo b > /proc/sysrq-trigger"},
			{"set time", `date -s 2000-01-01 >/dev/null 2>&1; [ "$(date +%Y)" = 2000 ]`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if class == "gvisor" && tc.name == "ip_forward" {
					// gVisor lets the sandbox set ip_forward of its own
					// user-space network stack (one interface: nothing to
					// forward to). The kernel's setting of the sandbox's
					// network namespace (inherited from the host) must not
					// move.
					before := netnsSysctl(t, id, "net/ipv4/ip_forward")
					flip := map[string]string{"0": "1", "1": "0"}[before]
					c.sh(id, "echo "+flip+" > /proc/sys/net/ipv4/ip_forward")
					if got := netnsSysctl(t, id, "net/ipv4/ip_forward"); got != before {
						t.Errorf("ip_forward of the sandbox's network namespace went from %q to %q after a write inside gVisor", before, got)
					}
					return
				}
				if res := c.sh(id, tc.script); res.ExitCode == 0 {
					t.Errorf("%q succeeded inside the sandbox; stdout %q stderr %q", tc.script, res.Stdout, res.Stderr)
				}
			})
		}
		if out := c.mustSh(id, "cat /proc/sys/kernel/hostname"); strings.TrimSpace(out) != id {
			t.Errorf("hostname changed: %q", out)
		}
	})
}

// netnsSysctl reads a sysctl (e.g. "net/ipv4/ip_forward") of the kernel
// in the sandbox's network namespace, found in its bundle's config.json.
func netnsSysctl(t *testing.T, id, name string) string {
	t.Helper()
	netns, _ := hostResources(t, id)
	out, err := exec.Command("nsenter", "--net="+netns, "cat", "/proc/sys/"+name).CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter %s: %v: %s", netns, err, out)
	}
	return strings.TrimSpace(string(out))
}

// sandboxAddr returns the sandbox's own IPv4 address and its gateway.
func sandboxAddr(t *testing.T, c *client, id string) (addr, gw string) {
	t.Helper()
	out := c.mustSh(id, "ip -4 -o addr show dev eth0; ip -4 route show default")
	for _, f := range strings.Fields(out) {
		if strings.Contains(f, "/") && addr == "" {
			addr = strings.Split(f, "/")[0]
		}
	}
	if i := strings.Index(out, "default via "); i >= 0 {
		gw = strings.Fields(out[i+len("default via "):])[0]
	}
	if net.ParseIP(addr) == nil || net.ParseIP(gw) == nil {
		t.Fatalf("cannot parse address/gateway from %q", out)
	}
	return addr, gw
}

// hostListener listens on every address of the host (network "tcp" or
// "tcp4") and answers "host\n" to each connection, so a test can tell a
// sandbox that reached a host port from one that was refused. It returns
// the port; the listener closes at the test's cleanup.
func hostListener(t *testing.T, network string) int {
	t.Helper()
	ln, err := net.Listen(network, "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("host\n"))
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestIsolationNetwork(t *testing.T) {
	eachRuntime(t, func(t *testing.T, c *client, class string) {
		a := c.create(map[string]any{"template": "busybox", "runtime": class})
		b := c.create(map[string]any{"template": "busybox", "runtime": class})
		bAddr, gw := sandboxAddr(t, c, b)

		// B serves on 8080; the host can reach it (that is how ptd reaches agents)...
		c.mustSh(b, "nc -ll -p 8080 -e echo hi </dev/null >/dev/null 2>&1 &")
		conn, err := dialWithin(net.JoinHostPort(bAddr, "8080"), 10*time.Second)
		if err != nil {
			t.Fatalf("host cannot reach a sandbox port: %v", err)
		}
		conn.Close()
		// ...but sandbox A cannot, by address...
		if res := c.sh(a, "echo x | nc -w 2 "+bAddr+" 8080"); res.ExitCode == 0 || strings.Contains(res.Stdout, "hi") {
			t.Errorf("sandbox A reached sandbox B: %+v", res)
		}
		// ...nor B's agent.
		if res := c.sh(a, "echo x | nc -w 2 "+bAddr+" 49983"); res.ExitCode == 0 {
			t.Errorf("sandbox A reached sandbox B's agent: %+v", res)
		}

		// The host's own ports: a listener this test opens on every address,
		// and ptd's API port.
		port := strconv.Itoa(hostListener(t, "tcp"))
		if res := c.sh(a, "echo x | nc -w 2 "+gw+" "+port); res.ExitCode == 0 || strings.Contains(res.Stdout, "host") {
			t.Errorf("sandbox reached a host port via the gateway: %+v", res)
		}
		_, apiPort, _ := net.SplitHostPort(strings.TrimPrefix(env.url, "http://"))
		// ptd's own listener (loopback) is out of reach; on the gateway the
		// only open port is the API proxy for sandbox-scoped tokens, which
		// answers nothing without a token.
		if res := c.sh(a, "echo x | nc -w 2 127.0.0.1 "+apiPort); res.ExitCode == 0 {
			t.Errorf("sandbox reached ptd's loopback port: %+v", res)
		}
		if res := c.sh(a, "wget -qO- http://"+gw+":"+apiPort+"/v1/sandboxes"); res.ExitCode == 0 || !strings.Contains(res.Stderr, "401") {
			t.Errorf("gateway API without a token: %+v", res)
		}
		// Link-local metadata addresses are dropped.
		if res := c.sh(a, "echo x | nc -w 1 169.254.169.254 80"); res.ExitCode == 0 {
			t.Errorf("sandbox reached 169.254.169.254: %+v", res)
		}
	})
}

// oomEvents returns the sandbox's oom_killed events' data.
func oomEvents(t *testing.T, c *client, id string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range listOf[sseEvent](t, c, "events", "/v1/events?format=json&type=oom_killed&sandbox_id="+id) {
		var d map[string]any
		json.Unmarshal(e.Data, &d)
		out = append(out, d)
	}
	return out
}

// startBystander starts a long sleep in the sandbox and returns its pid: a
// process that has nothing to do with a bomb, and must outlive it.
func startBystander(t *testing.T, c *client, id string) string {
	t.Helper()
	pid := strings.TrimSpace(c.mustSh(id, "sleep 3600 </dev/null >/dev/null 2>&1 & echo $!"))
	if pid == "" {
		t.Fatal("no bystander pid")
	}
	return pid
}

// TestIsolationMemoryBombOOMKilledInside: in a 256 MB sandbox, a process
// that grows to 600 MB is killed inside the sandbox, on both classes
// (runc: the kernel's OOM killer of the sandbox's cgroup; gVisor: gVisor's
// own kernel at the sandbox's memory limit, in the runsc scripts/setup.sh
// builds with third_party/gvisor's patch). Every other process of the
// sandbox lives on, the sandbox is never booted again, a second bomb right
// after the first is killed the same way, and the kill is an oom_killed
// event of scope "process" on the sandbox.
func TestIsolationMemoryBombOOMKilledInside(t *testing.T) {
	eachRuntime(t, func(t *testing.T, c *client, class string) {
		id := c.create(map[string]any{"template": "busybox", "runtime": class, "ram_mb": 256})
		bystander := startBystander(t, c, id)
		var before int
		var oomKills func() int
		if class == "runc" {
			_, cgroup := hostResources(t, id)
			oomKills = func() int {
				t.Helper()
				b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", cgroup, "memory.oom_control"))
				if err != nil {
					b, err = os.ReadFile(filepath.Join("/sys/fs/cgroup", cgroup, "memory.events"))
				}
				if err != nil {
					t.Fatalf("sandbox memory cgroup: %v", err)
				}
				for _, line := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
						n, _ := strconv.Atoi(v)
						return n
					}
				}
				t.Fatalf("no oom_kill counter in %q", b)
				return 0
			}
			before = oomKills()
		}
		// tail keeps the last 600 MB of an endless stream: it grows a read
		// at a time until the sandbox's memory runs out.
		res := c.sh(id, "tail -c 600m /dev/zero")
		if res.ExitCode != -1 || res.TimedOut {
			t.Fatalf("tail growing to 600 MB in a 256 MB sandbox ended with %+v; want it killed (exit_code -1)", res)
		}
		// A second bomb right after the first (its memory may not all be
		// back on the host yet) is killed the same way.
		if res := c.sh(id, "tail -c 600m /dev/zero"); res.ExitCode != -1 || res.TimedOut {
			t.Fatalf("a second tail growing to 600 MB ended with %+v; want it killed (exit_code -1)", res)
		}
		if oomKills != nil && oomKills() <= before {
			t.Errorf("the sandbox cgroup's oom_kill stayed at %d; want an OOM kill inside", before)
		}
		// The rest of the sandbox lives on: same processes, no new boot.
		if out := c.mustSh(id, "kill -0 "+bystander+" && echo alive"); out != "alive\n" {
			t.Errorf("bystander after the OOM kill: %q", out)
		}
		if r := c.do("GET", "/healthz", nil); r.Status != 200 {
			t.Errorf("ptd after OOM: %d", r.Status)
		}
		// The kill is an event on the sandbox.
		var evs []map[string]any
		for i := 0; i < 100 && len(evs) == 0; i++ {
			if evs = oomEvents(t, c, id); len(evs) == 0 {
				sleep(200)
			}
		}
		if len(evs) == 0 {
			t.Fatal("no oom_killed event 20 s after the kill")
		}
		if e := evs[0]; e["scope"] != "process" || e["count"].(float64) < 1 {
			t.Errorf("oom_killed event %v; want scope process", e)
		} else if class == "gvisor" && e["source"] != "kernel" {
			t.Errorf("oom_killed event %v; want the kill by gVisor's kernel", e)
		}
		for _, e := range evs {
			if e["scope"] == "sandbox" {
				t.Errorf("the whole sandbox was ended: %v", e)
			}
		}
	})
}

// TestIsolationOneCallMemoryBomb: one system call that asks for more than
// a 256 MB sandbox has (dd's single 512 MB read) never ends the sandbox
// and kills nothing but the dd, on both classes: the kernel's OOM killer
// (runc: the host's, gVisor: its own) kills the dd.
func TestIsolationOneCallMemoryBomb(t *testing.T) {
	eachRuntime(t, func(t *testing.T, c *client, class string) {
		id := c.create(map[string]any{"template": "busybox", "runtime": class, "ram_mb": 256})
		bystander := startBystander(t, c, id)
		for _, e := range bombKilledInside(t, c, id, bystander, "dd if=/dev/zero of=/dev/null bs=512M count=1") {
			if cmd, ok := e["command"].(string); ok && cmd != "dd" {
				t.Errorf("an OOM kill of another process than the dd: %v", e)
			}
		}
	})
}

// TestIsolationMemoryBombFarPastItsSize: a process that grows far past a
// 256 MB sandbox (tail keeping the last 2000 MB of /dev/zero, at gigabytes
// a second) is killed inside on both classes and the rest of the sandbox
// lives on. On gVisor, before its kernel kept the guest within its memory
// limit, nothing inside could act while such a bomb grew and the host
// ended the whole sandbox (docs/ARCHITECTURE.md, "Where gvisor differs").
func TestIsolationMemoryBombFarPastItsSize(t *testing.T) {
	eachRuntime(t, func(t *testing.T, c *client, class string) {
		id := c.create(map[string]any{"template": "busybox", "runtime": class, "ram_mb": 256})
		bystander := startBystander(t, c, id)
		bombKilledInside(t, c, id, bystander, "tail -c 2000m /dev/zero")
	})
}

// bombKilledInside runs bomb in sandbox id and checks that it is killed
// inside (exit_code -1), that bystander lives on and, once a gVisor kill
// has had time to arrive through its long poll, that no event says the
// whole sandbox was ended. It returns the sandbox's oom_killed events.
func bombKilledInside(t *testing.T, c *client, id, bystander, bomb string) []map[string]any {
	t.Helper()
	if res := c.sh(id, bomb); res.TimedOut || res.ExitCode != -1 {
		t.Errorf("%q in a 256 MB sandbox ended with %+v; want it killed inside (exit_code -1)", bomb, res)
	}
	if out := c.mustSh(id, "kill -0 "+bystander+" && echo alive"); out != "alive\n" {
		t.Errorf("bystander after %q: %q", bomb, out)
	}
	sleep(3000)
	evs := oomEvents(t, c, id)
	for _, e := range evs {
		if e["scope"] == "sandbox" {
			t.Errorf("the whole sandbox was ended: %v", e)
		}
	}
	return evs
}

// TestIsolationManyThreadsAreNotOOMKilled: 200 sleeping threads in a
// 256 MB sandbox use a few MB, and nothing is killed. gVisor allocates a
// page fault's memory 2 MiB at a time, so each thread's stack is allocated
// 2 MiB though the host holds a few pages of it: its kernel's memory limit
// must judge by what the host holds (third_party/gvisor/README.md), or it
// kills here what Linux never would.
func TestIsolationManyThreadsAreNotOOMKilled(t *testing.T) {
	eachRuntime(t, func(t *testing.T, c *client, class string) {
		ensureTemplate(t, c, "python-node")
		id := c.create(map[string]any{"template": "python-node", "runtime": class, "ram_mb": 256})
		res := c.sh(id, `python3 -c 'import threading, time
ts = [threading.Thread(target=time.sleep, args=(3,)) for _ in range(200)]
[t.start() for t in ts]
[t.join() for t in ts]
print("joined", len(ts))'`)
		if res.ExitCode != 0 || res.Stdout != "joined 200\n" {
			t.Errorf("200 sleeping threads in a 256 MB %s sandbox: %+v", class, res)
		}
		sleep(3000) // a gVisor kill is reported through a long poll
		if evs := oomEvents(t, c, id); len(evs) != 0 {
			t.Errorf("OOM kills of 200 sleeping threads: %v", evs)
		}
	})
}

// TestIsolationNeedWaitsForTheOOMKiller: memory the sandbox no longer has
// room for (96 MB of a fresh mapping, while another process holds 200 MB of
// the sandbox's 256) is had as on Linux: the largest process is killed, and
// a read into the mapping completes in full, not short or with EFAULT, as
// page faults on it do, not with SIGBUS.
func TestIsolationNeedWaitsForTheOOMKiller(t *testing.T) {
	eachRuntime(t, func(t *testing.T, c *client, class string) {
		ensureTemplate(t, c, "python-node")
		id := c.create(map[string]any{"template": "python-node", "runtime": class, "ram_mb": 256})
		const n = 96 << 20
		for _, tc := range []struct{ name, python string }{
			{"a read into a private mapping", `m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE); print(open("/dev/zero", "rb", buffering=0).readinto(m))`},
			{"a read into a shared mapping", `m = mmap.mmap(-1, n, flags=mmap.MAP_SHARED); print(open("/dev/zero", "rb", buffering=0).readinto(m))`},
			{"page faults on a shared mapping", `m = mmap.mmap(-1, n, flags=mmap.MAP_SHARED); print(sum(m.__setitem__(i, 1) or 4096 for i in range(0, n, 4096)))`},
		} {
			res := c.sh(id, `rm -f /tmp/held; python3 -c 'import time; b = bytearray(200 << 20); open("/tmp/held", "w").close(); time.sleep(30)' & h=$!
while [ ! -e /tmp/held ]; do sleep 0.1; done
python3 -c 'import mmap; n = `+strconv.Itoa(n)+`; `+tc.python+`'
wait $h; echo holder $?`)
			if want := fmt.Sprintf("%d\nholder 137\n", n); res.ExitCode != 0 || res.Stdout != want {
				t.Errorf("%s of 96 MB beside a 200 MB holder in a 256 MB %s sandbox: %+v, want stdout %q", tc.name, class, res, want)
			}
		}
	})
}

// TestIsolationForkBombStopsAtPidsLimit: a sandbox that forks without end
// is refused at its task limit inside (runc: the pids cgroup; gVisor:
// RLIMIT_NPROC in its own kernel, with the host's limits above it), and
// every other process of the sandbox lives on.
func TestIsolationForkBombStopsAtPidsLimit(t *testing.T) {
	eachRuntime(t, func(t *testing.T, c *client, class string) {
		id := c.create(map[string]any{"template": "busybox", "runtime": class})
		bystander := startBystander(t, c, id)
		// ptd runs with --pids-limit 256 in these tests. Counting and
		// killing use shell builtins only: at the limit nothing can fork.
		// ash gives up on the first failed fork, so the bomb runs in a
		// subshell that records each child's pid; the bomb's own sleeps are
		// then killed by pid, and nothing else is.
		res := c.sh(id, `(n=0; while [ $n -lt 600 ]; do sleep 60 & echo $! >> /tmp/bomb; n=$((n+1)); done) 2>/tmp/err; `+
			`set -- /proc/[0-9]*; echo $#; while read p; do kill -9 $p; done </tmp/bomb; grep -c "fork" /tmp/err || true`)
		lines := strings.Fields(res.Stdout)
		if len(lines) < 2 {
			t.Fatalf("fork bomb output: %+v", res)
		}
		procs, _ := strconv.Atoi(lines[0])
		if procs > 256 || procs < 100 {
			t.Errorf("sandbox reached %d processes; want the task limit of 256 to stop it (threads count too)", procs)
		}
		if lines[1] == "0" {
			t.Errorf("no fork failed: %+v", res)
		}
		if out := c.mustSh(id, "kill -0 "+bystander+" && echo alive"); out != "alive\n" {
			t.Errorf("bystander after the fork bomb: %q", out)
		}
		if evs := oomEvents(t, c, id); len(evs) != 0 {
			t.Errorf("a fork bomb under the task limit made OOM kills: %v", evs)
		}
	})
}

func TestIsolationDiskQuota(t *testing.T) {
	eachRuntime(t, func(t *testing.T, c *client, class string) {
		id := c.create(map[string]any{"template": "busybox", "runtime": class, "disk_gb": 1})
		res := c.sh(id, "dd if=/dev/zero of=/fill bs=1M count=1500 2>&1; sync; ls -l /fill")
		if res.ExitCode == 0 && !strings.Contains(res.Stdout, "No space left") {
			t.Fatalf("writing 1.5 GB on a 1 GB disk did not fail: %+v", res)
		}
		if !strings.Contains(res.Stdout+res.Stderr, "No space left") {
			t.Errorf("want ENOSPC, got %+v", res)
		}
		// Uploads past the quota fail with 507 and the sandbox keeps working.
		r := c.do("PUT", "/v1/sandboxes/"+id+"/files?path=/more.bin", make([]byte, 64<<20))
		if r.Status != 507 || r.JSON()["code"] != "no_space" {
			t.Errorf("upload on a full disk: %d %s", r.Status, r.Body)
		}
		c.mustSh(id, "rm -f /fill /more.bin && echo ok > /tmp/ok && cat /tmp/ok")
	})
}

func TestFilesPathSafety(t *testing.T) {
	eachRuntime(t, func(t *testing.T, c *client, class string) {
		id := c.create(map[string]any{"template": "busybox", "runtime": class})
		for _, p := range []string{"/tmp/../etc/passwd", "../../etc/shadow", "/a/b/../../.."} {
			if r := c.do("GET", "/v1/sandboxes/"+id+"/files?path="+p, nil); r.Status != 400 || r.JSON()["code"] != "invalid_request" {
				t.Errorf("GET %s: %d %s", p, r.Status, r.Body)
			}
			if r := c.do("PUT", "/v1/sandboxes/"+id+"/files?path="+p, "x"); r.Status != 400 {
				t.Errorf("PUT %s: %d %s", p, r.Status, r.Body)
			}
		}
		// Symlinks resolve inside the sandbox, never to the host's files.
		hostName, _ := os.Hostname()
		c.mustSh(id, "ln -s /etc/hostname /tmp/abs; ln -s ../../../../../../../etc/hostname /tmp/rel")
		for _, p := range []string{"/tmp/abs", "/tmp/rel"} {
			r := c.do("GET", "/v1/sandboxes/"+id+"/files?path="+p, nil)
			if r.Status != 200 || strings.TrimSpace(string(r.Body)) != id || (hostName != id && strings.Contains(string(r.Body), hostName)) {
				t.Errorf("GET %s: %d %q (want the sandbox's hostname %s)", p, r.Status, r.Body, id)
			}
		}
		// Writing through a symlink that points at the host's paths stays inside.
		c.mustSh(id, "ln -s /var/tmp /tmp/hostvar")
		name := "pt-e2e-escape-" + randHex(4)
		if r := c.do("PUT", "/v1/sandboxes/"+id+"/files?path=/tmp/hostvar/"+name, "x"); r.Status == 200 {
			if _, err := os.Stat("/var/tmp/" + name); err == nil {
				os.Remove("/var/tmp/" + name)
				t.Fatal("upload through a symlink wrote a host file")
			}
		}
	})
}
