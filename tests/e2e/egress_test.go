package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestEgressSecretInjection: a secret bound to a host reaches that host's
// HTTPS (and HTTP) server as its real value, swapped in by the egress
// proxy, while the sandbox only ever holds the placeholder: not in its
// environment, its files, its processes' environ and command lines, nor
// its processes' memory. A request to another host carries only the
// placeholder.
func TestEgressSecretInjection(t *testing.T) {
	c := newClient(t)
	out := newOutside(t, 1)
	runtimes := []string{"runc"}
	if hasRuntime(t, c, "gvisor") {
		runtimes = append(runtimes, "gvisor")
	}
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) { testSecretInjection(t, c, out, rt) })
	}
}

func testSecretInjection(t *testing.T, c *client, out *outside, runtime string) {
	srv := out.Addrs[0]
	sfx := randHex(4)
	bound, unbound := "api-"+sfx+".example.test", "other-"+sfx+".example.test"
	mapHosts(t, srv, bound, unbound)
	value := "sk-live-" + randHex(16)
	id := c.create(map[string]any{"template": "busybox", "runtime": runtime,
		"secrets": map[string]any{"API_KEY": map[string]any{"value": value, "hosts": []string{bound}, "body": true}}})
	installNetprobe(t, c, id)

	placeholder := strings.TrimSpace(c.mustSh(id, "echo $API_KEY"))
	if !strings.HasPrefix(placeholder, "pt_secret_") {
		t.Fatalf("sandbox env API_KEY = %q, want a placeholder", placeholder)
	}
	lastReq := func(host string) seenRequest {
		t.Helper()
		reqs := out.requests()
		for i := len(reqs) - 1; i >= 0; i-- {
			if strings.HasPrefix(reqs[i].Host, host) {
				return reqs[i]
			}
		}
		t.Fatalf("no request reached %s", host)
		return seenRequest{}
	}

	// HTTPS to the bound host: the sandbox trusts its egress CA (installed
	// at boot; SSL_CERT_FILE points at the bundle), the proxy verifies the
	// real server against the test's root.
	if got := probe(t, c, id, "get", "https://"+bound+"/", "API_KEY"); got != "ok 200 hello "+bound {
		t.Fatalf("HTTPS to the bound host: %q", got)
	}
	if r := lastReq(bound); !r.TLS || r.Header.Get("Authorization") != "Bearer "+value {
		t.Errorf("bound host over HTTPS got Authorization %q (TLS %v), want the value", r.Header.Get("Authorization"), r.TLS)
	}
	if got := probe(t, c, id, "post", "https://"+bound+"/", "API_KEY"); !strings.HasPrefix(got, "ok 200") {
		t.Fatalf("POST to the bound host: %q", got)
	}
	if r := lastReq(bound); r.Body != value {
		t.Errorf("bound host got body %q, want the value (body: true)", r.Body)
	}
	if got := probe(t, c, id, "get", "http://"+bound+"/", "API_KEY"); !strings.HasPrefix(got, "ok 200") {
		t.Fatalf("HTTP to the bound host: %q", got)
	}
	if r := lastReq(bound); r.TLS || r.Header.Get("Authorization") != "Bearer "+value {
		t.Errorf("bound host over HTTP got Authorization %q, want the value", r.Header.Get("Authorization"))
	}

	// Another host: placeholder only, over HTTPS (spliced end to end: the
	// client verifies the real server) and HTTP.
	if r := c.do("PUT", "/v1/sandboxes/"+id+"/files?path=/tmp/upstream-ca.pem", egressFixture.ca.CertPEM); r.Status/100 != 2 {
		t.Fatalf("upload CA: %d %s", r.Status, r.Body)
	}
	c.mustSh(id, "cat /etc/ssl/certs/ca-certificates.crt /tmp/upstream-ca.pem > /tmp/roots.pem")
	res := c.sh(id, "SSL_CERT_FILE=/tmp/roots.pem netprobe get https://"+unbound+"/ API_KEY")
	if got := strings.TrimSpace(res.Stdout); got != "ok 200 hello "+unbound {
		t.Fatalf("HTTPS to another host: %q %s", got, res.Stderr)
	}
	if r := lastReq(unbound); r.Header.Get("Authorization") != "Bearer "+placeholder {
		t.Errorf("unbound host over HTTPS got Authorization %q, want the placeholder", r.Header.Get("Authorization"))
	}
	if got := probe(t, c, id, "post", "http://"+unbound+"/", "API_KEY"); !strings.HasPrefix(got, "ok 200") {
		t.Fatalf("HTTP to another host: %q", got)
	}
	if r := lastReq(unbound); r.Header.Get("Authorization") != "Bearer "+placeholder || r.Body != placeholder {
		t.Errorf("unbound host over HTTP got %q / %q, want the placeholder", r.Header.Get("Authorization"), r.Body)
	}

	// A process that made a request and stays alive, for the memory scan.
	c.mustSh(id, "netprobe hold https://"+bound+"/ API_KEY >/tmp/hold.out 2>&1 </dev/null &")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.HasPrefix(c.mustSh(id, "cat /tmp/hold.out"), "ok 200") {
		if time.Now().After(deadline) {
			t.Fatalf("hold never finished its request: %q", c.mustSh(id, "cat /tmp/hold.out"))
		}
		sleep(100)
	}

	// Environment, boot env file, processes' environ and command lines as
	// the sandbox sees them.
	inside := c.mustSh(id, "env; cat /etc/pt-env; for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null; echo; done")
	if strings.Contains(inside, value) {
		t.Errorf("the secret value is visible inside the sandbox")
	}
	if !strings.Contains(inside, placeholder) {
		t.Errorf("the placeholder is not in the sandbox's environment: the scan proves nothing")
	}

	// Memory of every process of the sandbox, read from the host.
	// (Under gVisor these are the sentry and gofer: the sandbox's whole
	// memory is the sentry's.)
	pids := sandboxPids(t, id)
	if len(pids) < 1 {
		t.Fatalf("found no sandbox processes")
	}
	sawPlaceholder := false
	for _, pid := range pids {
		for _, f := range []string{"environ", "cmdline"} {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + f); bytes.Contains(b, []byte(value)) {
				t.Errorf("pid %d %s holds the secret value", pid, f)
			}
		}
		hasValue, hasPlaceholder := memContains(t, pid, []byte(value), []byte(placeholder))
		if hasValue {
			t.Errorf("pid %d's memory holds the secret value", pid)
		}
		sawPlaceholder = sawPlaceholder || hasPlaceholder
	}
	if !sawPlaceholder {
		t.Errorf("no sandbox process memory holds the placeholder: the memory scan proves nothing")
	}

	// Files: the sandbox's disk (upper layer and the raw image).
	c.mustSh(id, "sync")
	upper := filepath.Join(env.dataDir, "sandboxes", id, "disk", "upper")
	filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(value)) {
				t.Errorf("sandbox file %s holds the secret value", strings.TrimPrefix(p, upper))
			}
		}
		return nil
	})
	img := filepath.Join(env.dataDir, "disks", "pool", "images", id+".img")
	if found, err := sparseContains(img, []byte(value)); err != nil {
		t.Errorf("scan disk image: %v", err)
	} else if found {
		t.Errorf("the sandbox's disk image holds the secret value")
	}
}

// sandboxPids lists the host PIDs of the sandbox's processes (its cgroup
// path ends in the sandbox ID).
func sandboxPids(t *testing.T, id string) []int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cgroup")
		if err == nil && strings.Contains(string(b), "/"+id+"\n") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// memContains reads every readable mapping of pid and reports whether it
// holds a and b.
func memContains(t *testing.T, pid int, a, b []byte) (hasA, hasB bool) {
	t.Helper()
	maps, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return false, false // exited
	}
	defer maps.Close()
	mem, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return false, false
	}
	defer mem.Close()
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[1][0] != 'r' {
			continue
		}
		if len(f) >= 6 && (f[5] == "[vvar]" || f[5] == "[vvar_vclock]" || f[5] == "[vsyscall]") {
			continue
		}
		if len(f) >= 6 && strings.HasPrefix(f[5], "/memfd:") {
			// A memfd (gVisor's memory file) is read through its fd
			// below: reading its holes through the mapping would
			// allocate them, charged to the sandbox (an OOM kill).
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, _ := strconv.ParseUint(lo, 16, 64)
		end, _ := strconv.ParseUint(hi, 16, 64)
		if end-start > 1<<30 {
			continue
		}
		buf := make([]byte, end-start)
		n, _ := mem.ReadAt(buf, int64(start))
		hasA = hasA || bytes.Contains(buf[:n], a)
		hasB = hasB || bytes.Contains(buf[:n], b)
	}
	fds, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/fd/*")
	for _, fd := range fds {
		if target, _ := os.Readlink(fd); strings.HasPrefix(target, "/memfd:") {
			inA, _ := sparseContains(fd, a)
			inB, _ := sparseContains(fd, b)
			hasA, hasB = hasA || inA, hasB || inB
		}
	}
	return hasA, hasB
}

// sparseContains searches only the data regions of a sparse file.
func sparseContains(path string, needle []byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, _ := f.Stat()
	size := fi.Size()
	buf := make([]byte, 4<<20)
	var off int64
	for off < size {
		data, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		hole, err := unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return false, err
		}
		// Overlap reads by len(needle) so a match across reads is found.
		for p := data; p < hole; p += int64(len(buf) - len(needle)) {
			n, err := f.ReadAt(buf, p)
			if bytes.Contains(buf[:n], needle) {
				return true, nil
			}
			if err != nil && err != io.EOF {
				return false, err
			}
			if p+int64(n) >= hole {
				break
			}
		}
		off = hole
	}
	return false, nil
}
