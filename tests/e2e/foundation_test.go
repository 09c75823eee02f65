package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// TestExecStreamNDJSON: the streaming form of exec answers NDJSON events
// as the command produces them — start (with its pid), output while the
// command still runs, then exactly one exit — both with ?stream=true and
// with Accept: application/x-ndjson.
func TestExecStreamNDJSON(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})
	// The ctx deadline only keeps a buffering server from hanging the test:
	// the command below cannot end before the test has read "first".
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	open := func(query string, header map[string]string, cmd string) (*http.Response, *bufio.Scanner) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"cmd": cmd})
		req, _ := http.NewRequestWithContext(ctx, "POST", env.url+"/v1/sandboxes/"+id+"/exec"+query, strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+env.token)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
			t.Fatalf("stream exec: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return resp, bufio.NewScanner(resp.Body)
	}
	type event struct {
		Type     string `json:"type"`
		PID      int    `json:"pid"`
		Data     string `json:"data"`
		ExitCode *int   `json:"exit_code"`
		TimedOut bool   `json:"timed_out"`
	}
	next := func(sc *bufio.Scanner) (event, bool) {
		t.Helper()
		if !sc.Scan() {
			return event{}, false
		}
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		return ev, true
	}

	_, sc := open("?stream=true", nil, `echo first; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo second >&2; exit 5`)
	if ev, ok := next(sc); !ok || ev.Type != "start" || ev.PID <= 0 {
		t.Fatalf("first event = %+v (%v), want start with a pid", ev, sc.Err())
	}
	var stdout string
	for !strings.Contains(stdout, "first\n") {
		ev, ok := next(sc)
		if !ok || ev.Type != "stdout" {
			t.Fatalf("before the command can end: event %+v (%v), want stdout", ev, sc.Err())
		}
		stdout += ev.Data
	}
	// Only now can the command finish.
	c.mustSh(id, "touch /tmp/go")
	var stderr string
	var exits []event
	for {
		ev, ok := next(sc)
		if !ok {
			break
		}
		switch ev.Type {
		case "stdout":
			stdout += ev.Data
		case "stderr":
			stderr += ev.Data
		case "exit":
			exits = append(exits, ev)
		default:
			t.Errorf("unexpected event %+v", ev)
		}
	}
	if sc.Err() != nil || stdout != "first\n" || stderr != "second\n" || len(exits) != 1 || exits[0].ExitCode == nil || *exits[0].ExitCode != 5 {
		t.Errorf("stream: stdout %q stderr %q exits %+v err %v", stdout, stderr, exits, sc.Err())
	}

	_, sc = open("", map[string]string{"Accept": "application/x-ndjson"}, "echo hi")
	var types []string
	for ev, ok := next(sc); ok; ev, ok = next(sc) {
		types = append(types, ev.Type)
	}
	if strings.Join(types, ",") != "start,stdout,exit" {
		t.Errorf("Accept: application/x-ndjson events %v, want start,stdout,exit", types)
	}
}

// TestAdminTokenGenerated: a first start without PT_TOKEN generates the
// default org's admin token, saves it in <data-dir>/admin-token (0600) and
// prints it once; it works as a bearer token, and a restart neither
// replaces nor prints it again.
func TestAdminTokenGenerated(t *testing.T) {
	requireEnv(t)
	// The harness sets PT_TOKEN; an empty one (added last, so it wins) is
	// a start without it.
	d, err := ptdtest.Start(ptdtest.Options{Env: []string{"PT_TOKEN="}, ExtraArgs: []string{"--pids-limit", "256"}})
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("second ptd: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("second ptd: %v", err)
	}
	if d.StoreURL == "" {
		// The embedded store is SQLite under --data-dir.
		if b, err := os.ReadFile(filepath.Join(d.DataDir, "platinum.db")); err != nil || !strings.HasPrefix(string(b), "SQLite format 3\x00") {
			t.Errorf("no SQLite store at <data-dir>/platinum.db: %v", err)
		}
	} else if _, err := os.Stat(filepath.Join(d.DataDir, "platinum.db")); !os.IsNotExist(err) {
		// --store postgres://…: nothing of the store in the data dir.
		t.Errorf("a ptd on PostgreSQL made <data-dir>/platinum.db: %v", err)
	}
	path := filepath.Join(d.DataDir, "admin-token")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no admin-token file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("admin-token mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	tok := strings.TrimSpace(string(b))
	if len(tok) < 20 {
		t.Fatalf("admin-token %q", tok)
	}
	if n := strings.Count(d.Log(), tok); n != 1 {
		t.Errorf("token printed %d times at first start, want once:\n%s", n, d.Log())
	}
	get := func(token string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", d.URL+"/v1/sandboxes", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		return statusOf(t, req)
	}
	if s := get(tok); s != 200 {
		t.Errorf("generated token: %d", s)
	}
	if s := get(d.Token); s != 401 {
		t.Errorf("the harness's token (never given to this ptd): %d, want 401", s)
	}
	// An admin token can make orgs.
	req, _ := http.NewRequest("POST", d.URL+"/v1/orgs", strings.NewReader(`{"name":"from-generated"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	if st := statusOf(t, req); st != 201 {
		t.Errorf("admin token creating an org: %d", st)
	}

	d.Kill()
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
	if b2, _ := os.ReadFile(path); strings.TrimSpace(string(b2)) != tok {
		t.Errorf("restart replaced the admin token: %q → %q", tok, b2)
	}
	if n := strings.Count(d.Log(), tok); n != 1 {
		t.Errorf("token printed %d times after a restart, want only at first start", n)
	}
	if s := get(tok); s != 200 {
		t.Errorf("generated token after a restart: %d", s)
	}
}

// TestAgentInSandbox: pt-agent is the sandbox's init, a static binary
// bound read-only (the sandbox cannot change or remove it), reaping
// orphaned zombies, listening on
// 49983 at the sandbox's address, where /health answers 204 to anyone and
// everything else needs the sandbox's access token.
func TestAgentInSandbox(t *testing.T) {
	eachRuntime(t, func(t *testing.T, c *client, class string) {
		id := c.create(map[string]any{"template": "busybox", "runtime": class})
		hostAgent := filepath.Join(env.dataDir, "bin", "pt-agent")
		before, err := os.ReadFile(hostAgent)
		if err != nil {
			t.Fatal(err)
		}
		for _, script := range []string{
			"echo x > /.pt/pt-agent",
			"rm -f /.pt/pt-agent && [ ! -e /.pt/pt-agent ]",
			"mv /.pt/pt-agent /.pt/x",
			"chmod 777 /.pt/pt-agent && [ \"$(stat -c %a /.pt/pt-agent)\" = 777 ]",
		} {
			if res := c.sh(id, script); res.ExitCode == 0 {
				t.Errorf("%q succeeded inside the sandbox: %+v", script, res)
			}
		}
		if after, _ := os.ReadFile(hostAgent); string(after) != string(before) {
			t.Error("the host's pt-agent binary changed")
		}
		// PID 1 runs the injected binary.
		if out := c.mustSh(id, "readlink /proc/1/exe; cat /proc/1/cmdline | tr '\\0' ' '"); !strings.Contains(out, "pt-agent") {
			t.Errorf("pid 1 is not pt-agent: %q", out)
		}
		// Static: the ELF has no program interpreter (busybox has no libc to load one).
		f, err := elf.Open(hostAgent)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("pt-agent is dynamically linked (%v)", p.Type)
			}
		}
		f.Close()

		// As init it reaps orphans: children of exited parents never stay
		// zombies (the bound only keeps a broken reaper from hanging).
		c.mustSh(id, "for i in 1 2 3 4 5; do (sleep 0.1 &); done; sleep 0.5")
		for i := 0; ; i++ {
			z := strings.TrimSpace(c.mustSh(id, "ps -o stat | grep -c '^Z' || true"))
			if z == "0" {
				break
			}
			if i == 100 {
				t.Fatalf("%s zombies stay in the sandbox: pt-agent does not reap", z)
			}
			sleep(100)
		}

		addr, _ := sandboxAddr(t, c, id)
		base := "http://" + addr + ":49983"
		get := func(path, token string) int {
			t.Helper()
			req, _ := http.NewRequest("GET", base+path, nil)
			if token != "" {
				req.Header.Set("X-Access-Token", token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if s := get("/health", ""); s != 204 {
			t.Errorf("agent /health: %d, want 204", s)
		}
		for _, tok := range []string{"", "wrong-token", env.token} {
			if s := get("/files?path=/etc/hostname", tok); s != 401 {
				t.Errorf("agent /files with token %q: %d, want 401", tok, s)
			}
		}
	})
}

// hostResources returns the network namespace and cgroup path a running
// sandbox's OCI bundle names.
func hostResources(t *testing.T, id string) (netns, cgroup string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.dataDir, "sandboxes", id, "bundle", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Linux struct {
			CgroupsPath string
			Namespaces  []struct{ Type, Path string }
		}
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, ns := range cfg.Linux.Namespaces {
		if ns.Type == "network" {
			netns = ns.Path
		}
	}
	if netns == "" || cfg.Linux.CgroupsPath == "" {
		t.Fatalf("bundle of %s names no netns or cgroup: %s", id, b)
	}
	return netns, cfg.Linux.CgroupsPath
}

// hostLeftovers lists what of sandbox id is still on the host: its
// network namespace, mounts, cgroups in any hierarchy, loop devices backed
// by its disk, its directory under the data dir and processes in its
// cgroup.
func hostLeftovers(t *testing.T, id, netns, cgroup string) []string {
	t.Helper()
	var left []string
	if _, err := os.Stat(netns); err == nil {
		left = append(left, "netns "+netns)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, id) {
			left = append(left, "mount "+line)
		}
	}
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range append(hier, "/sys/fs/cgroup") {
		if _, err := os.Stat(filepath.Join(h, cgroup)); err == nil {
			left = append(left, "cgroup "+filepath.Join(h, cgroup))
		}
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range loops {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), id) {
			left = append(left, "loop "+f+" → "+strings.TrimSpace(string(b)))
		}
	}
	if _, err := os.Stat(filepath.Join(env.dataDir, "sandboxes", id)); err == nil {
		left = append(left, "dir "+filepath.Join(env.dataDir, "sandboxes", id))
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	for _, f := range procs {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), id) {
			left = append(left, "process "+filepath.Base(filepath.Dir(f)))
		}
	}
	return left
}

// TestUploadStreams: PUT /files streams the body into the sandbox as it
// arrives (a server that buffered the upload would write nothing before
// the body ends), and the file is byte-identical at the end.
func TestUploadStreams(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})
	chunk := make([]byte, 8<<20)
	for i := range chunk {
		chunk[i] = byte(i*31 + i>>12)
	}
	pr, pw := io.Pipe()
	type answer struct {
		status int
		body   string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("PUT", env.url+"/v1/sandboxes/"+id+"/files?path=/root/stream.bin", pr)
		req.Header.Set("Authorization", "Bearer "+env.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- answer{status: resp.StatusCode, body: string(b)}
	}()
	t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) })
	if _, err := pw.Write(chunk); err != nil {
		t.Fatal(err)
	}
	// The first half is in the sandbox while the upload is still open. The
	// bound only keeps a buffering server from hanging the test.
	for i := 0; ; i++ {
		out := strings.TrimSpace(c.mustSh(id, "stat -c %s /root/stream.bin 2>/dev/null || echo 0"))
		if n, _ := strconv.Atoi(out); n >= len(chunk)/2 {
			break
		}
		if i == 600 {
			t.Fatalf("nothing of an open upload reached the sandbox (size %s): the upload is buffered, not streamed", out)
		}
		sleep(100)
	}
	if _, err := pw.Write(chunk); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	a := <-done
	if a.err != nil || a.status != 200 || !strings.Contains(a.body, fmt.Sprintf(`"size":%d`, 2*len(chunk))) {
		t.Fatalf("upload: %d %s %v", a.status, a.body, a.err)
	}
	sum := sha256.Sum256(append(append([]byte{}, chunk...), chunk...))
	if out := c.mustSh(id, "sha256sum /root/stream.bin"); !strings.HasPrefix(out, hex.EncodeToString(sum[:])) {
		t.Errorf("uploaded file differs: %q", out)
	}
}

// TestTemplateVersionImmutable: a sandbox's writes, deletes included, go to
// its own disk; the template version it boots from (the overlay's lower
// dir) and every other sandbox of that version are untouched.
func TestTemplateVersionImmutable(t *testing.T) {
	c := newClient(t)
	a := c.create(map[string]any{"template": "busybox"})
	b := c.create(map[string]any{"template": "busybox"})
	lower := lowerDir(t, a)
	if lower != lowerDir(t, b) {
		t.Fatalf("two creates of one version mount %s and %s", lower, lowerDir(t, b))
	}
	c.mustSh(a, "echo changed > /etc/passwd && rm /bin/ls && echo new > /etc/pt-mark")
	if out := c.mustSh(b, "head -c 4 /etc/passwd; echo; [ -e /bin/ls ] && echo ls; [ -e /etc/pt-mark ] || echo nomark"); out != "root\nls\nnomark\n" {
		t.Errorf("another sandbox of the version sees the writes: %q", out)
	}
	for _, dir := range strings.Split(lower, ":") {
		if b, err := os.ReadFile(filepath.Join(dir, "etc/passwd")); err == nil && strings.HasPrefix(string(b), "changed") {
			t.Errorf("template version's /etc/passwd changed in %s", dir)
		}
		if _, err := os.Lstat(filepath.Join(dir, "etc/pt-mark")); err == nil {
			t.Errorf("a sandbox's new file is in the template version %s", dir)
		}
	}
	if _, err := os.Lstat(filepath.Join(lower, "bin/ls")); strings.Count(lower, ":") == 0 && err != nil {
		t.Errorf("a sandbox's delete removed bin/ls from the template version: %v", err)
	}
	if out := c.mustSh(a, "cat /etc/passwd; [ -e /bin/ls ] || echo gone"); out != "changed\ngone\n" {
		t.Errorf("the writing sandbox lost its own changes: %q", out)
	}
}

// TestSandboxDisk: each sandbox's disk is its own sparse XFS image of
// disk_gb in the data dir's XFS reflink pool, mounted at
// sandboxes/<id>/disk and holding the overlay's upper and work dirs; the
// sandbox sees its size.
func TestSandboxDisk(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox", "disk_gb": 3})
	img := filepath.Join(env.dataDir, "disks", "pool", "images", id+".img")
	var st syscall.Stat_t
	if err := syscall.Stat(img, &st); err != nil {
		t.Fatalf("sandbox image: %v", err)
	}
	if st.Size != 3<<30 {
		t.Errorf("image size %d, want disk_gb 3 = %d", st.Size, int64(3<<30))
	}
	if used := st.Blocks * 512; used > st.Size/4 {
		t.Errorf("image uses %d of %d bytes: not sparse", used, st.Size)
	}
	mounts := map[string]string{} // mount point → "fstype options"
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		for i, w := range f {
			if w == "-" && i+3 < len(f) {
				mounts[f[4]] = f[i+1] + " " + f[i+3]
			}
		}
	}
	pool := filepath.Join(env.dataDir, "disks", "pool")
	if !strings.HasPrefix(mounts[pool], "xfs ") {
		t.Errorf("pool %s is mounted as %q, want xfs", pool, mounts[pool])
	}
	// On a data dir without reflink (ext4 here) the pool is a sparse XFS
	// file under the data dir, loop-mounted.
	var fs syscall.Statfs_t
	if err := syscall.Statfs(env.dataDir, &fs); err != nil {
		t.Fatal(err)
	}
	const xfsMagic = 0x58465342
	if fs.Type != xfsMagic {
		poolImg := filepath.Join(env.dataDir, "disks", "pool.img")
		var ps syscall.Stat_t
		if err := syscall.Stat(poolImg, &ps); err != nil {
			t.Fatalf("no pool file on a non-XFS data dir: %v", err)
		}
		if ps.Blocks*512 >= ps.Size {
			t.Errorf("pool file %s is not sparse (%d of %d bytes)", poolImg, ps.Blocks*512, ps.Size)
		}
		backed := false
		loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
		for _, f := range loops {
			if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) == poolImg {
				backed = true
			}
		}
		if !backed {
			t.Errorf("no loop device is backed by %s", poolImg)
		}
	}
	disk := filepath.Join(env.dataDir, "sandboxes", id, "disk")
	if !strings.HasPrefix(mounts[disk], "xfs ") {
		t.Errorf("sandbox disk %s is mounted as %q, want xfs", disk, mounts[disk])
	}
	root := mounts[filepath.Join(env.dataDir, "sandboxes", id, "rootfs")]
	if !strings.HasPrefix(root, "overlay ") || !strings.Contains(root, "upperdir="+disk+"/upper") || !strings.Contains(root, "workdir="+disk+"/work") {
		t.Errorf("rootfs mount %q, want overlay with upper and work on the sandbox disk", root)
	}
	// The sandbox sees a disk of about 3 GB (XFS keeps some for itself).
	out := strings.Fields(c.mustSh(id, "df -k / | tail -1"))
	if len(out) < 2 {
		t.Fatalf("df: %q", out)
	}
	if kb, _ := strconv.Atoi(out[1]); kb < 2800000 || kb > 3<<20 {
		t.Errorf("sandbox / is %d KiB, want about 3 GiB", kb)
	}
}

// TestDefaultEgressIsNAT: a sandbox created without a network policy
// reaches outside hosts, masqueraded behind the host (the outside never
// sees the sandbox's own address).
func TestDefaultEgressIsNAT(t *testing.T) {
	c := newClient(t)
	out := ptdtest.NewOutside(t, "ptn", 1)
	out.Serve(t, "0.0.0.0:9100", func(conn net.Conn) { fmt.Fprintf(conn, "from %s\n", conn.RemoteAddr().(*net.TCPAddr).IP) })
	id := c.create(map[string]any{"template": "busybox"})
	addr, _ := sandboxAddr(t, c, id)
	res := c.sh(id, "nc -w 5 "+out.Addrs[0].String()+" 9100 </dev/null")
	seen, ok := strings.CutPrefix(strings.TrimSpace(res.Stdout), "from ")
	if res.ExitCode != 0 || !ok {
		t.Fatalf("sandbox could not reach an outside host by default: %+v", res)
	}
	if seen == addr {
		t.Errorf("the outside host saw the sandbox's own address %s: not NATed", addr)
	}
}

// TestSandboxLimits: cpu, ram_mb and the pids limit become the sandbox's
// own cgroup limits (cpu as a CFS quota, ram as memory and memory+swap).
func TestSandboxLimits(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox", "cpu": 1.5, "ram_mb": 384})
	_, cgroup := hostResources(t, id)
	read := func(ctrl, file string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", ctrl, cgroup, file))
		if err != nil {
			return "missing"
		}
		return strings.TrimSpace(string(b))
	}
	if q, p := read("cpu", "cpu.cfs_quota_us"), read("cpu", "cpu.cfs_period_us"); q+"/"+p != "150000/100000" {
		t.Errorf("cpu quota %s/%s, want 150000/100000 for cpu 1.5", q, p)
	}
	if m := read("memory", "memory.limit_in_bytes"); m != strconv.Itoa(384<<20) {
		t.Errorf("memory limit %s, want %d", m, 384<<20)
	}
	if sw := read("memory", "memory.memsw.limit_in_bytes"); sw != "missing" && sw != strconv.Itoa(384<<20) {
		t.Errorf("memory+swap limit %s, want %d", sw, 384<<20)
	}
	if p := read("pids", "pids.max"); p != "256" {
		t.Errorf("pids.max %s, want the --pids-limit 256", p)
	}
}

// TestSandboxNamespaces: a runc sandbox's init runs in its own pid, mount,
// network, uts, ipc and cgroup namespaces (none shared with the host).
func TestSandboxNamespaces(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox", "runtime": "runc"})
	var pid string
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	for _, f := range procs {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), id) {
			if comm, _ := os.ReadFile(filepath.Join(filepath.Dir(f), "comm")); strings.TrimSpace(string(comm)) == "pt-agent" {
				pid = filepath.Base(filepath.Dir(f))
			}
		}
	}
	if pid == "" {
		t.Fatalf("no pt-agent process in %s's cgroup", id)
	}
	for _, ns := range []string{"pid", "mnt", "net", "uts", "ipc", "cgroup"} {
		host, err1 := os.Readlink("/proc/self/ns/" + ns)
		sbx, err2 := os.Readlink("/proc/" + pid + "/ns/" + ns)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s namespace: %v %v", ns, err1, err2)
		}
		if host == sbx {
			t.Errorf("the sandbox shares the host's %s namespace (%s)", ns, sbx)
		}
	}
}

// TestSandboxPrivileges: processes in a runc sandbox run with no_new_privs,
// under a seccomp filter, without the dangerous capabilities, and with
// /proc's sensitive files masked.
func TestSandboxPrivileges(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox", "runtime": "runc"})
	status := c.mustSh(id, "cat /proc/self/status")
	field := func(name string) string {
		for _, line := range strings.Split(status, "\n") {
			if v, ok := strings.CutPrefix(line, name+":"); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatalf("no %s in /proc/self/status", name)
		return ""
	}
	if v := field("NoNewPrivs"); v != "1" {
		t.Errorf("NoNewPrivs = %s, want 1", v)
	}
	if v := field("Seccomp"); v != "2" {
		t.Errorf("Seccomp = %s, want 2 (filter)", v)
	}
	eff, err := strconv.ParseUint(field("CapEff"), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	for name, bit := range map[string]uint{"CAP_SYS_ADMIN": 21, "CAP_SYS_MODULE": 16, "CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13, "CAP_SYS_PTRACE": 19, "CAP_SYS_TIME": 25, "CAP_MKNOD": 27, "CAP_SYS_RAWIO": 17} {
		if eff&(1<<bit) != 0 {
			t.Errorf("sandbox processes have %s (CapEff %x)", name, eff)
		}
	}
	// Masked: what the host shows in /proc/timer_list reads empty inside.
	if b, err := os.ReadFile("/proc/timer_list"); err != nil || len(b) == 0 {
		t.Fatalf("host /proc/timer_list: %v (the check below could not fail)", err)
	}
	if out := c.mustSh(id, "wc -c < /proc/timer_list; grep ' /proc/sys ' /proc/mounts | grep -c ' ro,'"); out != "0\n1\n" {
		t.Errorf("/proc/timer_list not masked or /proc/sys not read-only: %q", out)
	}
}
