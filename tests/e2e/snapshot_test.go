package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// snapshot takes a snapshot of id and returns its JSON.
func (c *client) snapshot(id string, body map[string]any) map[string]any {
	c.t.Helper()
	r := c.do("POST", "/v1/sandboxes/"+id+"/snapshots", body)
	if r.Status != 201 {
		c.t.Fatalf("snapshot %s: %d %s", id, r.Status, r.Body)
	}
	return r.JSON()
}

// restore rolls id back to snap and waits until it runs again.
func (c *client) restore(id, snap string) map[string]any {
	c.t.Helper()
	r := c.do("POST", "/v1/sandboxes/"+id+"/restore?wait_for_state=running&wait_timeout_ms=300000", map[string]any{"snapshot_id": snap})
	if r.Status != 200 || r.JSON()["state"] != "running" {
		c.t.Fatalf("restore %s to %s: %d %s", id, snap, r.Status, r.Body)
	}
	return r.JSON()
}

// forEachClass runs f as a subtest per runtime class (runc, gvisor), each
// with a client of its own and a running busybox sandbox, id, of the
// class.
func forEachClass(t *testing.T, f func(t *testing.T, c *client, class, id string)) {
	for _, class := range []string{"runc", "gvisor"} {
		t.Run(class, func(t *testing.T) {
			c := newClient(t)
			f(t, c, class, c.create(map[string]any{"template": "busybox", "runtime": class}))
		})
	}
}

// TestSnapshotRestoreRollsBack: snapshot, change files, restore in place:
// the files are as they were at the snapshot, on both runtime classes.
// runc has no CRIU here, so its snapshot is disk-only and asking for
// memory is a clear 409.
func TestSnapshotRestoreRollsBack(t *testing.T) {
	forEachClass(t, func(t *testing.T, c *client, class, id string) {
		c.mustSh(id, "echo one > /root/a && mkdir -p /root/d && echo keep > /root/d/k")
		snap := c.snapshot(id, map[string]any{"name": "before", "memory": false})
		sid := snap["id"].(string)
		if !strings.HasPrefix(sid, "snap_") || snap["state"] != "ready" || snap["memory"] != false || snap["sandbox_id"] != id {
			t.Fatalf("snapshot = %v", snap)
		}
		t.Cleanup(func() { c.do("DELETE", "/v1/snapshots/"+sid, nil) })
		c.mustSh(id, "echo two > /root/a && echo new > /root/b && rm -r /root/d")

		got := c.restore(id, sid)
		if got["restore"] != "disk_only" {
			t.Errorf("restore of a disk snapshot: restore = %v, want disk_only", got["restore"])
		}
		if out := c.mustSh(id, "cat /root/a /root/d/k; ls /root/b 2>&1 || true"); !strings.HasPrefix(out, "one\nkeep\n") || !strings.Contains(out, "No such file") {
			t.Errorf("after restore: %q, want one, keep and no /root/b", out)
		}

		if r := c.do("GET", "/v1/sandboxes/"+id+"/snapshots", nil); r.Status != 200 || !strings.Contains(string(r.Body), sid) {
			t.Errorf("list snapshots: %d %s", r.Status, r.Body)
		}
		if class == "runc" {
			r := c.do("POST", "/v1/sandboxes/"+id+"/snapshots", map[string]any{"memory": true})
			if r.Status != 409 || r.JSON()["code"] != "memory_snapshot_unsupported" {
				t.Errorf("memory snapshot of runc: %d %s, want 409 memory_snapshot_unsupported", r.Status, r.Body)
			}
			if r := c.do("POST", "/v1/sandboxes/"+id+"/restore", map[string]any{"snapshot_id": "snap_01JZZZZZZZZZZZZZZZZZZZZZZZ"}); r.Status != 404 || r.JSON()["field"] != "snapshot_id" {
				t.Errorf("restore to an unknown snapshot: %d %s", r.Status, r.Body)
			}
		}
	})
}

// TestSnapshotOtherOrg: another org's token sees none of it (404).
func TestSnapshotOtherOrg(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})
	sid := c.snapshot(id, nil)["id"].(string)
	_, other := createOrg(t, c, "snap-other-"+randHex(3))
	for _, p := range []string{"/v1/snapshots/" + sid, "/v1/sandboxes/" + id + "/snapshots"} {
		if r := other.do("GET", p, nil); r.Status != 404 {
			t.Errorf("GET %s as another org: %d %s", p, r.Status, r.Body)
		}
	}
	if r := other.do("DELETE", "/v1/snapshots/"+sid, nil); r.Status != 404 {
		t.Errorf("DELETE as another org: %d %s", r.Status, r.Body)
	}
	if r := other.do("POST", "/v1/sandboxes", map[string]any{"from_snapshot": sid}); r.Status != 404 {
		t.Errorf("clone as another org: %d %s", r.Status, r.Body)
	}
	if r := c.do("DELETE", "/v1/snapshots/"+sid, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := c.do("GET", "/v1/snapshots/"+sid, nil); r.Status != 404 {
		t.Errorf("GET after delete: %d %s", r.Status, r.Body)
	}
}

// TestCloneFromSnapshot: a new sandbox from a snapshot has the files and
// its own identity.
func TestCloneFromSnapshot(t *testing.T) {
	c := newClient(t)
	src := c.create(map[string]any{"template": "busybox", "ram_mb": 256})
	c.mustSh(src, "echo payload > /root/data")
	sid := c.snapshot(src, nil)["id"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/snapshots/"+sid, nil) })
	c.mustSh(src, "echo later > /root/data")
	clone := c.create(map[string]any{"from_snapshot": sid})
	r := c.do("GET", "/v1/sandboxes/"+clone, nil)
	if m := r.JSON(); m["ram_mb"] != float64(256) || m["template"] != "busybox" {
		t.Errorf("clone record: %s", r.Body)
	}
	if out := c.mustSh(clone, "cat /root/data; hostname; cat /etc/hostname"); out != "payload\n"+clone+"\n"+clone+"\n" {
		t.Errorf("clone: %q", out)
	}
	if a, b := c.mustSh(src, "cat /etc/machine-id 2>/dev/null || true"), c.mustSh(clone, "cat /etc/machine-id"); a == b || len(strings.TrimSpace(b)) != 32 {
		t.Errorf("machine-id source %q clone %q: want a fresh one", a, b)
	}
	if r := c.do("POST", "/v1/sandboxes", map[string]any{"from_snapshot": sid, "template": "pt-base"}); r.Status != 400 || r.JSON()["field"] != "template" {
		t.Errorf("clone with another template: %d %s", r.Status, r.Body)
	}
}

// TestForkIdentity forks a running sandbox three times on both classes:
// every fork runs with the source's files, is its child, and has its own
// hostname, machine-id, entropy, address and token (which sees only its
// own children).
func TestForkIdentity(t *testing.T) {
	forEachClass(t, func(t *testing.T, c *client, class, src string) {
		c.mustSh(src, "echo shared > /root/f")
		r := c.do("POST", "/v1/sandboxes/"+src+"/fork?wait_for_state=running&wait_timeout_ms=300000", map[string]any{"count": 3})
		if r.Status != 201 {
			t.Fatalf("fork: %d %s", r.Status, r.Body)
		}
		res := r.JSON()
		if want := class == "gvisor"; res["memory"] != want {
			t.Errorf("fork memory = %v, want %v (%v)", res["memory"], want, res["memory_reason"])
		}
		var forks []string
		for _, v := range res["sandboxes"].([]any) {
			sb := v.(map[string]any)
			fid := sb["id"].(string)
			forks = append(forks, fid)
			t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+fid, nil) })
			if sb["state"] != "running" || sb["parent_id"] != src {
				t.Errorf("fork %s: state %v parent %v", fid, sb["state"], sb["parent_id"])
			}
		}
		if len(forks) != 3 {
			t.Fatalf("forks: %v", forks)
		}
		seen := map[string]string{}
		unique := func(what, fid, v string) {
			t.Helper()
			if o, ok := seen[what+v]; ok {
				t.Errorf("%s of %s equals %s's: %q", what, fid, o, v)
			}
			seen[what+v] = fid
		}
		for _, fid := range forks {
			out := c.mustSh(fid, "cat /root/f; hostname; cat /etc/hostname; cat /etc/machine-id; head -c 16 /dev/urandom | od -A n -t x1 | tr -d ' \\n'; echo; echo $PT_TOKEN")
			l := strings.Split(out, "\n")
			if len(l) < 6 || l[0] != "shared" || l[1] != fid || l[2] != fid {
				t.Errorf("fork %s: %q", fid, out)
				continue
			}
			unique("machine-id", fid, l[3])
			unique("urandom", fid, l[4])
			addr, err := os.ReadFile(filepath.Join(env.dataDir, "sandboxes", fid, "address"))
			if err != nil {
				t.Errorf("address of %s: %v", fid, err)
			}
			unique("address", fid, string(addr))
			if l[5] == "" {
				t.Errorf("fork %s has no PT_TOKEN", fid)
				continue
			}
			unique("token", fid, l[5])
			tok := &client{t: t, token: l[5]}
			if r := tok.do("GET", "/v1/sandboxes", nil); r.Status != 200 || strings.Contains(string(r.Body), "sbx_") {
				t.Errorf("fork %s's token lists: %d %s", fid, r.Status, r.Body)
			}
			for _, other := range append([]string{src}, forks...) {
				if r := tok.do("GET", "/v1/sandboxes/"+other, nil); r.Status != 404 {
					t.Errorf("fork %s's token reads %s: %d", fid, other, r.Status)
				}
			}
		}
		if out := c.mustSh(src, "hostname; cat /root/f"); out != src+"\nshared\n" {
			t.Errorf("source after fork: %q", out)
		}
	})
}

// startCounter starts a process in the sandbox that writes an increasing
// count to /root/count ten times a second.
func startCounter(c *client, id string) {
	c.t.Helper()
	c.mustSh(id, `(i=0; while true; do i=$((i+1)); echo $i > /root/count.new; mv /root/count.new /root/count; sleep 0.1; done) </dev/null >/dev/null 2>&1 &`)
	waitCount(c, id, 3)
}

func readCount(c *client, id string) int {
	c.t.Helper()
	n, _ := strconv.Atoi(strings.TrimSpace(c.sh(id, "cat /root/count 2>/dev/null").Stdout))
	return n
}

// waitCount waits until the sandbox's counter passes min.
func waitCount(c *client, id string, min int) int {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if n := readCount(c, id); n > min {
			return n
		}
		sleep(100)
	}
	c.t.Fatalf("counter in %s never passed %d", id, min)
	return 0
}

// TestMemorySnapshotGVisor: a memory snapshot of a gVisor sandbox keeps its
// processes: restoring it in place brings the counter back, counting on
// from where it was at the snapshot (not from where it was later), and a
// clone from it counts on too.
func TestMemorySnapshotGVisor(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox", "runtime": "gvisor"})
	startCounter(c, id)
	snap := c.snapshot(id, map[string]any{"memory": true})
	sid := snap["id"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/snapshots/"+sid, nil) })
	if snap["memory"] != true {
		t.Fatalf("snapshot = %v, want memory", snap)
	}
	at := readCount(c, id)
	later := waitCount(c, id, at+20)

	got := c.restore(id, sid)
	if got["restore"] != "memory" || got["ram_restored"] != true {
		t.Errorf("restore: %v / %v, want memory", got["restore"], got["ram_restored"])
	}
	n := waitCount(c, id, 0)
	if n >= later {
		t.Errorf("counter after restore = %d, want below %d (rolled back to about %d)", n, later, at)
	}
	if m := waitCount(c, id, n+5); m <= n {
		t.Errorf("counter stopped at %d after restore", n)
	}

	clone := c.create(map[string]any{"from_snapshot": sid})
	if r := c.do("GET", "/v1/sandboxes/"+clone, nil); r.JSON()["restore"] != "memory" {
		t.Errorf("clone from a memory snapshot: %s", r.Body)
	}
	n = waitCount(c, clone, 0)
	waitCount(c, clone, n+5)
	if out := c.mustSh(clone, "hostname"); out != clone+"\n" {
		t.Errorf("clone hostname %q", out)
	}
}

// TestBackupRoundTrip backs a sandbox up to the object store, checks a
// second backup of a barely changed disk uploads only a few chunks, then
// restores it on a second ptd (another data dir, the same object store)
// and compares the files byte for byte.
func TestBackupRoundTrip(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})
	c.mustSh(id, "mkdir -p /root/data && head -c 3000000 /dev/urandom > /root/data/big && echo small > /root/data/small && ln -s big /root/data/link")
	sums := c.mustSh(id, "cd /root/data && sha256sum big small && readlink link")

	backup := func() map[string]any {
		t.Helper()
		r := c.do("POST", "/v1/sandboxes/"+id+"/backups", map[string]any{"name": "b"})
		if r.Status != 202 || !strings.HasPrefix(r.JSON()["id"].(string), "bkp_") {
			t.Fatalf("backup: %d %s", r.Status, r.Body)
		}
		bid := r.JSON()["id"].(string)
		deadline := time.Now().Add(5 * time.Minute)
		for time.Now().Before(deadline) {
			g := c.do("GET", "/v1/snapshots/"+bid, nil).JSON()
			switch g["state"] {
			case "ready":
				if g["complete"] != true || g["manifest_key"] == "" {
					t.Fatalf("backup ready but %v", g)
				}
				return g
			case "failed":
				t.Fatalf("backup failed: %v", g)
			}
			sleep(200)
		}
		t.Fatalf("backup %s never completed", bid)
		return nil
	}
	chunks := func() int {
		t.Helper()
		e, _ := os.ReadDir(filepath.Join(env.dataDir, "objects", "platinum-archives", "chunks"))
		return len(e)
	}
	b1 := backup()
	first := chunks()
	c.mustSh(id, "echo changed >> /root/data/small")
	b2 := backup()
	added := chunks() - first
	if added < 1 || added > 4 {
		t.Errorf("second backup of a barely changed disk added %d chunks (the first made %d), want 1 to 4", added, first)
	}
	if r := c.do("GET", "/v1/sandboxes/"+id+"/backups", nil); !strings.Contains(string(r.Body), b1["id"].(string)) || !strings.Contains(string(r.Body), b2["id"].(string)) {
		t.Errorf("list backups: %s", r.Body)
	}

	d2, err := ptdtest.Start(ptdtest.Options{ExtraArgs: []string{"--objects", filepath.Join(env.dataDir, "objects"), "--pids-limit", "256"}})
	t.Cleanup(func() {
		if err := d2.Stop(); err != nil {
			t.Errorf("second ptd: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("second ptd: %v", err)
	}
	c2 := &client2{t: t, token: d2.Token, url: d2.URL}
	r := c2.do2("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=300000", map[string]any{"from_backup": b1["id"]})
	if r.Status != 201 || r.JSON()["state"] != "running" {
		t.Fatalf("restore backup on the second ptd: %d %s", r.Status, r.Body)
	}
	rid := r.JSON()["id"].(string)
	t.Cleanup(func() { c2.do2("DELETE", "/v1/sandboxes/"+rid, nil) })
	x := c2.do2("POST", "/v1/sandboxes/"+rid+"/exec", map[string]any{"cmd": "cd /root/data && sha256sum big small && readlink link", "timeout_ms": 60000})
	if got := x.JSON()["stdout"]; got != sums {
		t.Errorf("files on the second host: %v, want %q", got, sums)
	}
	// Another org on the second host does not find it.
	if r := c2.do2("POST", "/v1/orgs", map[string]any{"name": "bk-other"}); r.Status == 201 {
		o := &client2{t: t, token: r.JSON()["token"].(string), url: d2.URL}
		if r := o.do2("POST", "/v1/sandboxes", map[string]any{"from_backup": b2["id"]}); r.Status != 404 {
			t.Errorf("another org restores the backup: %d %s", r.Status, r.Body)
		}
	}
}

// client2 talks to another ptd than the package's.
type client2 struct {
	t          *testing.T
	url, token string
}

func (c *client2) do2(method, path string, body any) response {
	c.t.Helper()
	return rawDo(c.t, c.url, c.token, method, path, body, nil)
}

// rawDo is one API call to base with extra headers.
func rawDo(t *testing.T, base, token, method, path string, body any, hdr map[string]string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, base+path, ptdtest.JSONBody(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	r, err := ptdtest.Send(nil, req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// TestSnapshotForkIdempotent: a snapshot or fork retried with the same
// Idempotency-Key answers the first call's result and makes nothing more.
func TestSnapshotForkIdempotent(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})
	key := map[string]string{"Idempotency-Key": "snap-" + randHex(8)}
	first := rawDo(t, env.url, env.token, "POST", "/v1/sandboxes/"+id+"/snapshots", map[string]any{"name": "once"}, key)
	again := rawDo(t, env.url, env.token, "POST", "/v1/sandboxes/"+id+"/snapshots", map[string]any{"name": "once"}, key)
	if first.Status != 201 || again.Status != 201 || first.JSON()["id"] == nil || first.JSON()["id"] != again.JSON()["id"] {
		t.Fatalf("retried snapshot: %d %s / %d %s", first.Status, first.Body, again.Status, again.Body)
	}
	if again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retried snapshot not marked replayed: %v", again.Header)
	}
	sid := first.JSON()["id"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/snapshots/"+sid, nil) })
	if r := c.do("GET", "/v1/sandboxes/"+id+"/snapshots", nil); len(r.JSON()["rows"].([]any)) != 1 {
		t.Errorf("snapshots after a retried call: %s", r.Body)
	}

	key = map[string]string{"Idempotency-Key": "fork-" + randHex(8)}
	first = rawDo(t, env.url, env.token, "POST", "/v1/sandboxes/"+id+"/fork?wait_for_state=running&wait_timeout_ms=300000", map[string]any{"count": 2}, key)
	if first.Status != 201 {
		t.Fatalf("fork: %d %s", first.Status, first.Body)
	}
	ids := func(r response) []string {
		var out []string
		for _, v := range r.JSON()["sandboxes"].([]any) {
			out = append(out, v.(map[string]any)["id"].(string))
		}
		return out
	}
	for _, fid := range ids(first) {
		t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+fid, nil) })
	}
	again = rawDo(t, env.url, env.token, "POST", "/v1/sandboxes/"+id+"/fork?wait_for_state=running&wait_timeout_ms=300000", map[string]any{"count": 2}, key)
	if again.Status != 201 || strings.Join(ids(first), ",") != strings.Join(ids(again), ",") {
		t.Fatalf("retried fork: %s / %s", first.Body, again.Body)
	}
	if r := c.do("GET", "/v1/sandboxes/"+id+"/children", nil); strings.Count(string(r.Body), `"id":"sbx_`) != 2 {
		t.Errorf("children after a retried fork: %s", r.Body)
	}
}

// TestSnapshotCLI drives snapshots, restore, fork and backups through pt:
// --json answers, --wait with progress on stderr, list and rm.
func TestSnapshotCLI(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})
	c.mustSh(id, "echo v1 > /root/v")
	out, errOut, code := pt(t, nil, "sandbox", "snapshot", id, "--name", "cli", "--json")
	var snap struct {
		ID, State string
		Memory    bool
	}
	if code != 0 || json.Unmarshal([]byte(out), &snap) != nil || !strings.HasPrefix(snap.ID, "snap_") || snap.State != "ready" {
		t.Fatalf("pt sandbox snapshot: %d %q %q", code, out, errOut)
	}
	if out, _, code := pt(t, nil, "snapshot", "list", id); code != 0 || !strings.Contains(out, snap.ID) || !strings.Contains(out, "disk only") {
		t.Errorf("pt snapshot list: %d %q", code, out)
	}
	c.mustSh(id, "echo v2 > /root/v")
	if out, errOut, code := pt(t, nil, "sandbox", "restore", id, snap.ID, "--wait"); code != 0 || !strings.Contains(out, "running") {
		t.Errorf("pt sandbox restore --wait: %d %q %q", code, out, errOut)
	}
	if got := c.mustSh(id, "cat /root/v"); got != "v1\n" {
		t.Errorf("after pt sandbox restore: %q", got)
	}
	out, errOut, code = pt(t, nil, "sandbox", "fork", id, "-n", "2", "--wait", "--json")
	var fork struct {
		Sandboxes []struct{ ID, State string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &fork) != nil || len(fork.Sandboxes) != 2 {
		t.Fatalf("pt sandbox fork: %d %q %q", code, out, errOut)
	}
	for _, f := range fork.Sandboxes {
		t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+f.ID, nil) })
		if f.State != "running" {
			t.Errorf("fork %s: %s", f.ID, f.State)
		}
	}
	out, errOut, code = pt(t, nil, "sandbox", "backup", id, "--wait")
	if code != 0 || !strings.Contains(out, "ready") || !strings.Contains(errOut, "backup bkp_") {
		t.Errorf("pt sandbox backup --wait: %d %q %q", code, out, errOut)
	}
	bid := strings.Fields(out)[1]
	if out, _, code := pt(t, nil, "snapshot", "list", id, "--backups", "--json"); code != 0 || !strings.Contains(out, bid) {
		t.Errorf("pt snapshot list --backups: %d %q", code, out)
	}
	if out, _, code := pt(t, nil, "snapshot", "rm", snap.ID, bid); code != 0 || strings.Count(out, "deleted") != 2 {
		t.Errorf("pt snapshot rm: %d %q", code, out)
	}
	if _, errOut, code := pt(t, nil, "snapshot", "rm", snap.ID); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("pt snapshot rm of a deleted snapshot: %d %q", code, errOut)
	}
}
