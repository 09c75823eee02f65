package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/crypto/ssh"

	"github.com/platinum-dev/platinum/internal/apicontract"
	"github.com/platinum-dev/platinum/internal/image/imagetest"
	"github.com/platinum-dev/platinum/internal/pgtest"
	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/sshgw"
	"github.com/platinum-dev/platinum/internal/testenv"
	"github.com/platinum-dev/platinum/internal/upstream"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// startHosts starts n ptd processes on one PostgreSQL store (the first
// one's throwaway cluster): n hosts of one platform on this machine, each
// with its own data dir, bridge, subnet and cgroup parent.
func startHosts(t *testing.T, n int, args ...string) []*ptdtest.Daemon {
	t.Helper()
	_, err := pgtest.BinDir()
	testenv.Require(t, err == nil, fmt.Sprint(err))
	var ds []*ptdtest.Daemon
	for i := range n {
		opts := ptdtest.Options{Store: "postgres", ExtraArgs: args}
		if i > 0 {
			opts = ptdtest.Options{Store: "sqlite", KeysFrom: ds[0].DataDir, ExtraArgs: append(append([]string{}, args...), "--store", ds[0].StoreURL)}
		}
		d := startNamed(t, fmt.Sprint(i), opts)
		ds = append(ds, d)
	}
	return ds
}

// startNamed starts a ptd named name in t's logs: stopped when t ends
// (its WARN and ERROR lines logged first if t failed), its answers checked
// against the API document.
func startNamed(t *testing.T, name string, o ptdtest.Options) *ptdtest.Daemon {
	t.Helper()
	d, err := ptdtest.Start(o)
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range strings.Split(d.Log(), "\n") {
				if strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
					t.Logf("ptd %s: %s", name, l)
				}
			}
		}
		if err := d.Stop(); err != nil {
			t.Errorf("ptd %s: %v", name, err)
		}
	})
	if err != nil {
		t.Fatalf("ptd %s: %v", name, err)
	}
	t.Cleanup(apicontract.Register(d.URL))
	return d
}

// e2bConnect connects the e2b SDK to sandbox argv[1], prints its
// metadata's "who", reads the file the test uploaded, writes one and reads
// it back (files, not commands: busybox has no /bin/bash for E2B's).
const e2bConnect = `
import sys
from e2b import Sandbox
s = Sandbox.connect(sys.argv[1])
print(s.get_info().metadata["who"])
print(s.files.read("/root/host.txt"))
s.files.write("/root/e2b.txt", "via-e2b")
print(s.files.read("/root/e2b.txt"))
`

// TestOneEntryManyHosts: three hosts on one store, every call made
// through the first one's API only. Three creates are spread over the
// three hosts; exec (whole and streamed), file upload and download, the
// real e2b Python SDK, and a stop and start of each reach the sandbox on
// its own host; a record read
// through any ptd is the same. When a host dies, calls for its sandbox
// answer 503 unavailable until it is marked lost, and creates go to the
// hosts that live. Once it is lost, its sandbox with a backup runs again on
// a live host from that backup (last_start says so; a file written after
// the backup does not come back), its sandbox without one is failed
// host_lost and no other host starts it, and its stopped one starts on a
// live host from its stop snapshot; back, the host destroys its stale
// copies and forwards to the sandboxes' new hosts. An entry ptd killed
// mid-create leaves the create whole on its host, answered to the same
// Idempotency-Key through another ptd.
func TestOneEntryManyHosts(t *testing.T) {
	requireEnv(t)
	ds := startHosts(t, 3, "--pids-limit", "256", "--host-heartbeat", "200ms", "--host-lost-after", "3s",
		"--reconcile-interval", "1s", "--timer-interval", "500ms", "--objects", t.TempDir())
	a, c := ds[0], ds[2]
	hostIDs := map[string]int{}
	for i, d := range ds {
		hostIDs[hostIDOf(t, d)] = i
	}
	ctx := context.Background()
	cl := platinum.New(a.URL, a.Token)
	e2bPython := testenv.RequiresVenv(t, "../compat/e2b")

	byHost, who := map[string]*platinum.Sandbox{}, map[string]string{}
	for i := range 3 {
		name := fmt.Sprint("box", i)
		sb, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox",
			Env: map[string]string{"WHO": name}, Metadata: map[string]string{"who": name}}, platinum.WaitForRunning(2*time.Minute))
		if err != nil {
			t.Fatalf("create %d through a: %v", i, err)
		}
		t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), sb.ID) })
		if _, ok := hostIDs[sb.HostID]; !ok {
			t.Fatalf("sandbox %s placed on %q, not one of the hosts %v", sb.ID, sb.HostID, hostIDs)
		}
		byHost[sb.HostID], who[sb.ID] = sb, name
	}
	if len(byHost) != 3 {
		t.Fatalf("three creates through a landed on %d hosts, want 3: %v", len(byHost), byHost)
	}

	for host, sb := range byHost {
		t.Run(fmt.Sprint("ptd", hostIDs[host]), func(t *testing.T) {
			res, err := cl.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: "echo $WHO"})
			if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != who[sb.ID] {
				t.Fatalf("exec through a: %+v %v, want %s", res, err, who[sb.ID])
			}
			var out, errOut bytes.Buffer
			res, err = cl.Sandboxes.ExecStream(ctx, sb.ID, platinum.ExecRequest{Shell: "for i in 1 2 3; do echo $i; sleep 0.1; done"}, &out, &errOut)
			if err != nil || res.ExitCode != 0 || out.String() != "1\n2\n3\n" {
				t.Fatalf("streamed exec through a: %+v %v %q", res, err, out.String())
			}
			if err := cl.Sandboxes.Upload(ctx, sb.ID, "/root/host.txt", strings.NewReader(host)); err != nil {
				t.Fatalf("upload through a: %v", err)
			}
			readBack := func() string {
				rc, err := cl.Sandboxes.Download(ctx, sb.ID, "/root/host.txt")
				if err != nil {
					t.Fatalf("download through a: %v", err)
				}
				defer rc.Close()
				b, _ := io.ReadAll(rc)
				return string(b)
			}
			if got := readBack(); got != host {
				t.Fatalf("file read back through a = %q, want %q", got, host)
			}
			if _, err := cl.Sandboxes.Stop(ctx, sb.ID, platinum.WaitForStopped(time.Minute)); err != nil {
				t.Fatalf("stop through a: %v", err)
			}
			got, err := cl.Sandboxes.Start(ctx, sb.ID, platinum.WaitForRunning(2*time.Minute))
			if err != nil || got.HostID != host {
				t.Fatalf("start through a: %+v %v, want running on %s", got, err, host)
			}
			if got := readBack(); got != host {
				t.Fatalf("file after stop and start = %q, want %q", got, host)
			}
			// The real e2b SDK, told only a's URL: its control-plane call
			// and its envd traffic (E2b-Sandbox-Id) reach the host too.
			py := exec.Command(e2bPython, "-c", e2bConnect, sb.ID)
			py.Env = append(os.Environ(), "E2B_API_URL="+a.URL, "E2B_SANDBOX_URL="+a.URL, "E2B_API_KEY="+a.Token, "E2B_DEBUG=")
			if out, err := py.CombinedOutput(); err != nil || string(out) != who[sb.ID]+"\n"+host+"\nvia-e2b\n" {
				t.Fatalf("e2b SDK through a: %v\n%s", err, out)
			}
			// The record is the same through every ptd.
			for i, d := range ds {
				r, err := platinum.New(d.URL, d.Token).Sandboxes.Get(ctx, sb.ID)
				if err != nil || r.State != platinum.StateRunning || r.HostID != host {
					t.Fatalf("GET through ptd %d: %+v %v", i, r, err)
				}
			}
		})
	}

	// An entry ptd killed mid-create (b, drained so that its create goes
	// to another host): the create completes there or not at all, and the
	// same Idempotency-Key through a answers the one sandbox.
	b := ds[1]
	idB := hostIDOf(t, b)
	if _, err := cl.Hosts.Drain(ctx, idB); err != nil {
		t.Fatal(err)
	}
	before, err := cl.Sandboxes.List(ctx, platinum.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	create := func(d *ptdtest.Daemon) (int, map[string]any, error) {
		req, _ := http.NewRequest("POST", d.URL+"/v1/sandboxes?wait_for_state=running", strings.NewReader(`{"template":"busybox","metadata":{"mid":"create"}}`))
		req.Header.Set("Authorization", "Bearer "+a.Token)
		req.Header.Set("Idempotency-Key", "entry-killed-mid-create")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var m map[string]any
		return resp.StatusCode, m, json.NewDecoder(resp.Body).Decode(&m)
	}
	go func() { time.Sleep(30 * time.Millisecond); b.Kill() }()
	if st, m, err := create(b); err == nil {
		t.Logf("the create through b answered before b died: %d %v", st, m)
	}
	st, m, err := create(a)
	if err != nil || st >= 300 || m["state"] != "running" || m["host_id"] == idB {
		t.Fatalf("the same create through a: %d %v %v, want the one sandbox running on a live host", st, m, err)
	}
	t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), m["id"].(string)) })
	after, err := cl.Sandboxes.List(ctx, platinum.ListOptions{})
	if err != nil || len(after.Rows) != len(before.Rows)+1 {
		t.Fatalf("sandboxes after the killed create and its retry: %d, had %d (%v)", len(after.Rows), len(before.Rows), err)
	}
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Hosts.Undrain(ctx, idB); err != nil {
		t.Fatal(err)
	}

	// Before c dies: its first sandbox gets a backup (a file written
	// before it comes back, one written after does not); a second sandbox
	// on c (a and b drained while it is made) has none.
	idC := hostIDOf(t, c)
	backed := byHost[idC]
	if err := cl.Sandboxes.Upload(ctx, backed.ID, "/root/kept.txt", strings.NewReader("backed up")); err != nil {
		t.Fatal(err)
	}
	bk, err := cl.Sandboxes.Backup(ctx, backed.ID, platinum.BackupOptions{Name: "before", Wait: true})
	if err != nil {
		t.Fatalf("backup through a: %v", err)
	}
	if err := cl.Sandboxes.Upload(ctx, backed.ID, "/root/after.txt", strings.NewReader("too late")); err != nil {
		t.Fatal(err)
	}
	drain := func(on bool) {
		for _, d := range ds[:2] {
			op := cl.Hosts.Undrain
			if on {
				op = cl.Hosts.Drain
			}
			if _, err := op(ctx, hostIDOf(t, d)); err != nil {
				t.Fatalf("drain %v %s: %v", on, hostIDOf(t, d), err)
			}
		}
	}
	drain(true)
	bare, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"}, platinum.WaitForRunning(2*time.Minute))
	if err != nil || bare.HostID != idC {
		drain(false)
		t.Fatalf("create with only c taking sandboxes: %+v %v", bare, err)
	}
	t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), bare.ID) })
	// A third sandbox on c is stopped: its stop snapshot (the disk as it
	// stopped) goes to the object store.
	parked, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"}, platinum.WaitForRunning(2*time.Minute))
	drain(false)
	if err != nil || parked.HostID != idC {
		t.Fatalf("create with only c taking sandboxes: %+v %v", parked, err)
	}
	t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), parked.ID) })
	if err := cl.Sandboxes.Upload(ctx, parked.ID, "/root/parked.txt", strings.NewReader("parked")); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Sandboxes.Stop(ctx, parked.ID, platinum.WaitForStopped(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var stopSnap string
	for deadline := time.Now().Add(time.Minute); stopSnap == ""; time.Sleep(200 * time.Millisecond) {
		bks, err := cl.Sandboxes.ListBackups(ctx, parked.ID)
		for _, b := range bks {
			if b.Name == "pt:stop" && b.State == platinum.SnapshotReady {
				stopSnap = b.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stop snapshot of the stopped sandbox: %+v %v", bks, err)
		}
	}

	// c dies without a word.
	c.Kill()
	// Creates meanwhile go to a host that lives, even before c is marked
	// lost (placement passes over a host it cannot reach).
	sb, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"}, platinum.WaitForRunning(2*time.Minute))
	if err != nil {
		t.Fatalf("create through a with c dead: %v", err)
	}
	t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), sb.ID) })
	if sb.HostID == idC {
		t.Fatalf("create placed on the dead host %s", idC)
	}
	// The sandbox without a backup: unavailable while c may come back,
	// failed host_lost once it is lost; never anything else.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := cl.Sandboxes.Get(ctx, bare.ID)
		var ae *platinum.APIError
		if err == nil && got.State == platinum.StateFailed && got.Reason == "host_lost" {
			break
		}
		switch {
		case errors.As(err, &ae) && ae.StatusCode == http.StatusServiceUnavailable && ae.Code == "unavailable":
		case err == nil && got.State == platinum.StateRunning: // c is lost, the record not failed yet
		default:
			t.Fatalf("c's sandbox without a backup, after c died: %+v %v", got, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("c's sandbox without a backup never shown failed host_lost")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Its disk is on c: no other host starts it (an empty disk is not it).
	var ae *platinum.APIError
	if _, err := cl.Sandboxes.Start(ctx, bare.ID); !errors.As(err, &ae) || ae.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("start of the lost host's sandbox elsewhere: %v, want 503", err)
	}
	// The stopped one starts on a live host from its stop snapshot.
	got, err := cl.Sandboxes.Start(ctx, parked.ID, platinum.WaitForRunning(2*time.Minute))
	if err != nil || got.HostID == idC {
		t.Fatalf("start of the lost host's stopped sandbox: %+v %v, want running on a live host", got, err)
	}
	if ls, err := got.LastStart(); err != nil || ls == nil || !strings.Contains(ls.Reason, stopSnap) {
		t.Fatalf("its last start = %+v %v, want one naming the stop snapshot %s", ls, err, stopSnap)
	}
	if res, err := cl.Sandboxes.Exec(ctx, parked.ID, platinum.ExecRequest{Shell: "cat /root/parked.txt"}); err != nil || res.Stdout != "parked" {
		t.Fatalf("the stopped sandbox's file after its start elsewhere: %+v %v", res, err)
	}
	// The backed-up one runs again on a live host, from its backup.
	var rec *platinum.Sandbox
	for deadline = time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if rec, err = cl.Sandboxes.Get(ctx, backed.ID); err == nil && rec.State == platinum.StateRunning && rec.HostID != idC {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backed-up sandbox never ran elsewhere: %+v %v", rec, err)
		}
	}
	ls, err := rec.LastStart()
	if err != nil || ls == nil || ls.Restore != platinum.RestoreDiskOnly || ls.RAMRestored || !strings.Contains(ls.Reason, bk.ID) || !strings.Contains(ls.Reason, idC) {
		t.Fatalf("the recovered sandbox's last start = %+v %v, want disk_only from %s after %s was lost", ls, err, bk.ID, idC)
	}
	read := func(path string) (string, error) {
		rc, err := cl.Sandboxes.Download(ctx, backed.ID, path)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	if got, err := read("/root/kept.txt"); err != nil || got != "backed up" {
		t.Fatalf("the backed-up file after recovery: %q %v", got, err)
	}
	if got, err := read("/root/after.txt"); err == nil {
		t.Fatalf("a file written after the backup came back: %q", got)
	}

	// c comes back: it destroys its stale copy of the recovered sandbox
	// and frees the failed one's, and its ptd forwards to the new host.
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	for deadline = time.Now().Add(90 * time.Second); !logLine(c.Log(), "swept host resources", backed.ID); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("c never destroyed its stale copy of %s", backed.ID)
		}
	}
	res, err := platinum.New(c.URL, c.Token).Sandboxes.Exec(ctx, backed.ID, platinum.ExecRequest{Shell: "cat /root/kept.txt"})
	if err != nil || res.Stdout != "backed up" {
		t.Fatalf("the recovered sandbox through c: %+v %v", res, err)
	}
}

// logLine reports whether one line of log holds every part.
func logLine(log string, parts ...string) bool {
	for l := range strings.SplitSeq(log, "\n") {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l, p) }) {
			return true
		}
	}
	return false
}

// TestAPIOnlyEntry: a ptd started with --role=api runs no sandboxes (no
// bridge, no host registered) and is the only entry to two hosts: its
// creates land on both, and exec, files, the e2b SDK, stop and start reach
// each sandbox on its host; with every host draining it answers 503
// capacity no_host and creates nothing; a template build is refused.
func TestAPIOnlyEntry(t *testing.T) {
	requireEnv(t)
	// The registry of the template build is on loopback. No host dies
	// here, so none is given a short bound to be marked lost in.
	args := []string{"--pids-limit", "256", "--host-heartbeat", "200ms", "--host-lost-after", "1m", "--objects", t.TempDir(),
		"--image-registry-allow-private"}
	hosts := startHosts(t, 2, args...)
	api, err := ptdtest.Start(ptdtest.Options{Store: "sqlite", KeysFrom: hosts[0].DataDir, ExtraArgs: append(append([]string{}, args...), "--store", hosts[0].StoreURL, "--role", "api")})
	t.Cleanup(func() {
		if err := api.Stop(); err != nil {
			t.Errorf("api ptd: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("api ptd: %v", err)
	}
	t.Cleanup(apicontract.Register(api.URL))
	if out, err := exec.Command("ip", "link", "show", api.Bridge).CombinedOutput(); err == nil {
		t.Fatalf("the api ptd made its bridge %s: %s", api.Bridge, out)
	}
	ctx := context.Background()
	cl := platinum.New(api.URL, api.Token)
	hs, err := cl.Hosts.List(ctx)
	if err != nil || len(hs) != 2 {
		t.Fatalf("hosts through the api: %+v %v, want the two hosts only", hs, err)
	}
	e2bPython := testenv.RequiresVenv(t, "../compat/e2b")
	seen := map[string]bool{}
	for i := range 2 {
		sb, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", Metadata: map[string]string{"who": fmt.Sprint("box", i)}},
			platinum.WaitForRunning(2*time.Minute))
		if err != nil {
			t.Fatalf("create %d through the api: %v", i, err)
		}
		t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), sb.ID) })
		seen[sb.HostID] = true
		if err := cl.Sandboxes.Upload(ctx, sb.ID, "/root/host.txt", strings.NewReader(sb.HostID)); err != nil {
			t.Fatalf("upload through the api: %v", err)
		}
		py := exec.Command(e2bPython, "-c", e2bConnect, sb.ID)
		py.Env = append(os.Environ(), "E2B_API_URL="+api.URL, "E2B_SANDBOX_URL="+api.URL, "E2B_API_KEY="+api.Token, "E2B_DEBUG=")
		if out, err := py.CombinedOutput(); err != nil || string(out) != fmt.Sprint("box", i)+"\n"+sb.HostID+"\nvia-e2b\n" {
			t.Fatalf("e2b SDK through the api: %v\n%s", err, out)
		}
		if _, err := cl.Sandboxes.Stop(ctx, sb.ID, platinum.WaitForStopped(time.Minute)); err != nil {
			t.Fatalf("stop through the api: %v", err)
		}
		if _, err := cl.Sandboxes.Start(ctx, sb.ID, platinum.WaitForRunning(2*time.Minute)); err != nil {
			t.Fatalf("start through the api: %v", err)
		}
		res, err := cl.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: "cat /root/e2b.txt"})
		if err != nil || res.Stdout != "via-e2b" {
			t.Fatalf("exec through the api after a stop and start: %+v %v", res, err)
		}
	}
	if len(seen) != 2 {
		t.Fatalf("two creates through the api landed on %v, want both hosts", seen)
	}
	sessionAndBuildThrough(t, cl, hosts)
	if entries, _ := os.ReadDir(filepath.Join(api.DataDir, "sandboxes")); len(entries) != 0 {
		t.Fatalf("the api ptd holds sandboxes: %v", entries)
	}

	before, err := cl.Sandboxes.List(ctx, platinum.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if _, err := cl.Hosts.Drain(ctx, hostIDOf(t, h)); err != nil {
			t.Fatal(err)
		}
	}
	var ae *platinum.APIError
	_, err = cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"})
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusServiceUnavailable || ae.Code != "capacity" || ae.Body["reason"] != "no_host" {
		t.Fatalf("create through the api with every host draining: %v, want 503 capacity no_host", err)
	}
	if after, err := cl.Sandboxes.List(ctx, platinum.ListOptions{}); err != nil || len(after.Rows) != len(before.Rows) {
		t.Fatalf("the refused create left sandboxes: %d, had %d (%v)", len(after.Rows), len(before.Rows), err)
	}
	// Sessions and template builds are placed as creates are: refused
	// alike, nothing made.
	for _, c := range []struct {
		path string
		body any
	}{
		{"/v1/templates/busybox/builds", nil},
		{"/v1/sessions", map[string]any{"vault_id": "vault-api", "workflow_id": "wf-drained", "template": "busybox"}},
		{"/v1/templates", map[string]any{"slug": "apionly-drained", "from_image": "127.0.0.1:1/none:1"}},
	} {
		if st, m := post(t, api, c.path, c.body); st != http.StatusServiceUnavailable || m["code"] != "capacity" || m["reason"] != "no_host" {
			t.Fatalf("POST %s through the api with every host draining: %d %v, want 503 capacity no_host", c.path, st, m)
		}
	}
	if ss, err := cl.Sessions.List(ctx, true); err != nil || slices.ContainsFunc(ss, func(s platinum.Session) bool { return s.WorkflowID == "wf-drained" }) {
		t.Fatalf("the refused session create left a session: %+v %v", ss, err)
	}
}

// sessionAndBuildThrough drives a session and a custom template build
// through cl, a client of a ptd that runs no sandboxes (docs/operating.md,
// "Many hosts"): the session's create is placed on a host, and its
// reads, exec and stop go to the host of its sandbox; the build, from an
// image in a registry on loopback, is placed on a host and its log
// followed through the api; a sandbox created from it runs the image.
func sessionAndBuildThrough(t *testing.T, cl *platinum.Client, hosts []*ptdtest.Daemon) {
	t.Helper()
	ctx := context.Background()
	hostIDs := map[string]bool{}
	for _, h := range hosts {
		hostIDs[hostIDOf(t, h)] = true
	}
	ses, err := cl.Sessions.Create(ctx, platinum.SessionCreateRequest{
		SessionContext: platinum.SessionContext{VaultID: "vault-api", WorkflowID: "wf-" + randHex(4)}, Template: "busybox"})
	if err != nil {
		t.Fatalf("session through the api: %v", err)
	}
	t.Cleanup(func() { cl.Sessions.Stop(context.Background(), ses.SessionID, time.Minute) })
	if ses, err = cl.Sessions.Wait(ctx, ses.SessionID, 2*time.Minute); err != nil {
		t.Fatalf("session through the api never ready: %+v %v", ses, err)
	}
	sb, err := cl.Sandboxes.Get(ctx, ses.SandboxID)
	if err != nil || !hostIDs[sb.HostID] {
		t.Fatalf("the session's sandbox %s: host %q %v, want one of the hosts %v", ses.SandboxID, sb.HostID, err, hostIDs)
	}
	if err := cl.Sessions.Upload(ctx, ses.SessionID, ses.Workspace.Path+"/note", strings.NewReader("kept")); err != nil {
		t.Fatalf("upload to the session through the api: %v", err)
	}
	res, err := cl.Sessions.Exec(ctx, ses.SessionID, platinum.ExecRequest{Shell: "cat " + ses.Workspace.Path + "/note; echo; hostname"})
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "kept\n") {
		t.Fatalf("exec in the session through the api: %+v %v", res, err)
	}
	if got, err := cl.Sessions.Stop(ctx, ses.SessionID, time.Minute); err != nil || got.Status != platinum.SessionStopped {
		t.Fatalf("stop the session through the api: %+v %v", got, err)
	}
	if sb, err := cl.Sandboxes.Get(ctx, ses.SandboxID); err == nil && sb.State != platinum.StateDeleted && sb.State != platinum.StateDeleting {
		t.Fatalf("the stopped session's sandbox is %s", sb.State)
	}

	reg := imagetest.Registry(t, nil)
	ref := reg + "/api/only:1"
	imagetest.Push(t, ref, imagetest.Image(t, v1.Config{Env: []string{"PATH=/bin"}}, busyboxLayer(t),
		imagetest.Layer(t, imagetest.Entry{Name: "etc/built-via", Body: "api-only"})))
	slug := "apionly-" + randHex(4)
	t.Cleanup(func() {
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
			var ae *platinum.APIError
			if _, err := cl.Templates.Delete(context.Background(), slug); !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict || time.Now().After(deadline) {
				return
			}
		}
	})
	b, err := cl.Templates.Create(ctx, platinum.CreateTemplateRequest{Slug: slug, FromImage: ref})
	if err != nil {
		t.Fatalf("template build through the api: %v", err)
	}
	lines := 0
	if b, err = cl.Templates.Wait(ctx, slug, b.ID, func(platinum.BuildLogLine) { lines++ }); err != nil || b.Status != platinum.BuildReady || lines == 0 {
		t.Fatalf("template build through the api: %+v %v (%d log lines)", b, err, lines)
	}
	tsb, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: slug}, platinum.WaitForRunning(2*time.Minute))
	if err != nil {
		t.Fatalf("create from the built template through the api: %v", err)
	}
	t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), tsb.ID) })
	if res, err := cl.Sandboxes.Exec(ctx, tsb.ID, platinum.ExecRequest{Shell: "cat /etc/built-via"}); err != nil || res.Stdout != "api-only" || tsb.TemplateVersionID != b.VersionID {
		t.Fatalf("sandbox of the built template: %+v %v (version %s, built %s)", res, err, tsb.TemplateVersionID, b.VersionID)
	}
}

// TestStartRelocatesOnCapacity: host b takes one start at a time and
// waits 10 ms for a slot. While a gVisor sandbox's cold start holds its
// slot, the start of a stopped sandbox there is refused by its queue and
// relocated to a through its stop snapshot: 202 code relocating, the
// record a's, restoring; a second start (through b's ptd, forwarded to a)
// joins it with the same answer; it ends running on a with its file. The
// relocated sandbox is a gVisor one stopped with memory: its stop snapshot
// carries the checkpoint, and it runs on a with its background process
// still running (restore "memory"). Stopped again there while a drains,
// its start moves it back to b.
func TestStartRelocatesOnCapacity(t *testing.T) {
	requireEnv(t)
	// No host dies here (see TestAPIOnlyEntry).
	args := []string{"--pids-limit", "256", "--host-heartbeat", "200ms", "--host-lost-after", "1m",
		"--objects", t.TempDir(), "--start-admission-slots", "1", "--start-admission-wait", "10ms"}
	ds := startHosts(t, 2, args...)
	a, b := ds[0], ds[1]
	idA, idB := hostIDOf(t, a), hostIDOf(t, b)
	ctx := context.Background()
	cl := platinum.New(a.URL, a.Token)

	if _, err := cl.Hosts.Drain(ctx, idA); err != nil {
		t.Fatal(err)
	}
	st, m := post(t, a, "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=120000", map[string]any{"template": "busybox", "runtime": "gvisor"})
	if st != 201 {
		t.Fatalf("create the gVisor sandbox: %d %v", st, m)
	}
	blocker := struct{ ID, HostID string }{m["id"].(string), m["host_id"].(string)}
	t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), blocker.ID) })
	st, m = post(t, a, "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=120000", map[string]any{"template": "busybox", "runtime": "gvisor"})
	if _, err := cl.Hosts.Undrain(ctx, idA); err != nil {
		t.Fatal(err)
	}
	if st != 201 || m["host_id"] != idB || blocker.HostID != idB {
		t.Fatalf("creates with only b taking sandboxes: %d %v %+v", st, m, blocker)
	}
	sb := struct{ ID string }{m["id"].(string)}
	t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), sb.ID) })
	if err := cl.Sandboxes.Upload(ctx, sb.ID, "/root/moved.txt", strings.NewReader("moved")); err != nil {
		t.Fatal(err)
	}
	if res, err := cl.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: `sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > /root/sleep.pid`}); err != nil || res.ExitCode != 0 {
		t.Fatalf("start a background process: %+v %v", res, err)
	}
	for id, q := range map[string]string{blocker.ID: "memory=false&", sb.ID: ""} {
		if st, m := post(t, a, "/v1/sandboxes/"+id+"/stop?"+q+"wait_for_state=stopped", nil); st != 200 {
			t.Fatalf("stop %s: %d %v", id, st, m)
		}
	}
	waitStartsOnAnyHost(t, cl, sb.ID)
	if bks, err := cl.Sandboxes.ListBackups(ctx, sb.ID); err != nil || !slices.ContainsFunc(bks, func(b platinum.Snapshot) bool {
		return b.Name == "pt:stop" && b.State == platinum.SnapshotReady && b.Memory
	}) {
		t.Fatalf("the gVisor sandbox's stop snapshot: %+v %v, want one ready with memory", bks, err)
	}

	// The gVisor cold start holds b's one slot; the next start waits 10 ms
	// for it, far less than a gVisor cold start takes (with a wait of
	// 100 ms a start on a fast host sometimes found the slot free again).
	if st, m := post(t, a, "/v1/sandboxes/"+blocker.ID+"/start", nil); st != 200 {
		t.Fatalf("start the gVisor sandbox: %d %v", st, m)
	}
	st, m = post(t, a, "/v1/sandboxes/"+sb.ID+"/start", nil)
	if st != 202 || m["code"] != "relocating" || m["state"] != "restoring" || m["host_id"] != idA {
		t.Fatalf("start on a full host: %d %v, want 202 relocating to a (%s)", st, m, idA)
	}
	if st, m := post(t, b, "/v1/sandboxes/"+sb.ID+"/start", nil); st != 202 && st != 200 || st == 202 && m["code"] != "relocating" {
		t.Fatalf("second start through b: %d %v, want it to join the relocation", st, m)
	}
	got, err := cl.Sandboxes.Start(ctx, sb.ID, platinum.WaitForRunning(2*time.Minute))
	for deadline := time.Now().Add(2 * time.Minute); err != nil || got.State != platinum.StateRunning; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the relocated sandbox never ran: %+v %v", got, err)
		}
		got, err = cl.Sandboxes.Get(ctx, sb.ID)
	}
	if got.HostID != idA {
		t.Fatalf("relocated sandbox runs on %s, want a (%s)", got.HostID, idA)
	}
	if ls, err := got.LastStart(); err != nil || ls == nil || ls.Restore != platinum.RestoreMemory {
		t.Fatalf("the relocated sandbox's last start: %+v %v, want memory", ls, err)
	}
	if res, err := cl.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: "cat /root/moved.txt"}); err != nil || res.Stdout != "moved" {
		t.Fatalf("the relocated sandbox's file: %+v %v", res, err)
	}
	if res, err := cl.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: `tr '\0' ' ' < /proc/"$(cat /root/sleep.pid)"/cmdline`}); err != nil || strings.TrimSpace(res.Stdout) != "sleep 1000" {
		t.Fatalf("the relocated sandbox's background process: %+v %v, want it running", res, err)
	}

	// Stopped on a, with a draining: its start moves it back to b through
	// its new stop snapshot, at once (the relocation guard is for busy
	// hosts, not drains).
	if st, m := post(t, a, "/v1/sandboxes/"+sb.ID+"/stop?memory=false&wait_for_state=stopped", nil); st != 200 {
		t.Fatalf("stop on a: %d %v", st, m)
	}
	waitStartsOnAnyHost(t, cl, sb.ID)
	if _, err := cl.Hosts.Drain(ctx, idA); err != nil {
		t.Fatal(err)
	}
	st, m = post(t, b, "/v1/sandboxes/"+sb.ID+"/start", nil)
	if st != 202 || m["code"] != "relocating" || m["host_id"] != idB || !strings.Contains(fmt.Sprint(m["reason"]), "host_draining") {
		t.Fatalf("start on a draining host: %d %v, want 202 relocating to b (%s)", st, m, idB)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if got, err = cl.Sandboxes.Get(ctx, sb.ID); err == nil && got.State == platinum.StateRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox moved off the draining host never ran: %+v %v", got, err)
		}
	}
	if res, err := cl.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: "cat /root/moved.txt"}); err != nil || res.Stdout != "moved" || got.HostID != idB {
		t.Fatalf("moved off the draining host: on %s, file %+v %v; want b's with the file", got.HostID, res, err)
	}
}

// waitStartsOnAnyHost waits until stopped sandbox id's record says any
// host may start it: its stop snapshot of this stop is complete.
func waitStartsOnAnyHost(t *testing.T, cl *platinum.Client, id string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		got, err := cl.Sandboxes.Get(context.Background(), id)
		if err == nil && got.StartsOn == "any_host" {
			return
		}
		if time.Now().After(deadline) {
			bks, _ := cl.Sandboxes.ListBackups(context.Background(), id)
			t.Fatalf("%s never said starts_on any_host: %+v %v (backups %+v)", id, got, err, bks)
		}
	}
}

// post sends a POST of body (none when nil) with d's token and decodes
// the answer.
func post(t *testing.T, d *ptdtest.Daemon, path string, body any) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", d.URL+path, ptdtest.JSONBody(body))
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Content-Type", "application/json")
	r, err := ptdtest.Send(nil, req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	var m map[string]any
	json.Unmarshal(r.Body, &m)
	return r.Status, m
}

// TestPreviewAndSSHAcrossHosts: two hosts and an api-only ptd on one
// store, every ptd's preview URLs naming the api-only ptd's preview
// listener (--preview-public-url). A sandbox on host b is reached through
// host a's and the api-only ptd's preview listeners (path and host forms,
// a WebSocket echo, a gRPC call that stays HTTP/2 to the sandbox; the token is still required and stripped, a stopped
// sandbox resumes through b) and through their SSH gateways with the real
// OpenSSH client (a command, its exit code and stdin, an scp); a key the sandbox does
// not hold is refused at both, as is a relay key no ptd holds. Once b
// dies, its preview through a answers 503 and SSH fails clearly.
func TestPreviewAndSSHAcrossHosts(t *testing.T) {
	requireEnv(t)
	requireSSH(t)
	apiPreview, err := ptdtest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, apiPort, _ := net.SplitHostPort(apiPreview)
	// b may not be marked lost while the test reads its 503s.
	args := []string{"--pids-limit", "256", "--host-heartbeat", "200ms", "--host-lost-after", "10m", "--objects", t.TempDir(),
		"--preview-public-url", "http://localhost:" + apiPort}
	hosts := startHosts(t, 2, args...)
	a, b := hosts[0], hosts[1]
	api := startNamed(t, "api", ptdtest.Options{Store: "sqlite", KeysFrom: a.DataDir,
		ExtraArgs: append(append([]string{}, args...), "--store", a.StoreURL, "--role", "api", "--preview-listen", apiPreview)})
	api.PreviewURL = "http://" + apiPreview // the harness's own --preview-listen was overridden
	ctx := context.Background()
	cl := platinum.New(api.URL, api.Token)

	// The sandbox goes to b: a drains while it is created.
	idA, idB := hostIDOf(t, a), hostIDOf(t, b)
	if _, err := cl.Hosts.Drain(ctx, idA); err != nil {
		t.Fatal(err)
	}
	key, pub := sshKey(t, "owner")
	st, m := post(t, api, "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=120000", map[string]any{"template": "busybox", "ssh_keys": []string{pub}})
	if _, err := cl.Hosts.Undrain(ctx, idA); err != nil {
		t.Fatal(err)
	}
	if st != 201 || m["host_id"] != idB {
		t.Fatalf("create with a draining: %d %v, want 201 on %s", st, m, idB)
	}
	id := m["id"].(string)
	t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), id) })
	bin, err := os.ReadFile(previewSrvBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Sandboxes.Upload(ctx, id, "/root/previewsrv", bytes.NewReader(bin)); err != nil {
		t.Fatal(err)
	}
	res, err := cl.Sandboxes.Exec(ctx, id, platinum.ExecRequest{Shell: fmt.Sprintf(`chmod +x /root/previewsrv; (/root/previewsrv -listen :%d </dev/null >/tmp/previewsrv.log 2>&1 &)
for i in $(seq 100); do wget -q -O /dev/null http://127.0.0.1:%d/hello && exit 0; sleep 0.05; done; cat /tmp/previewsrv.log; exit 1`, previewPort, previewPort)})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("start previewsrv: %+v %v", res, err)
	}

	// Issued by b (the call is forwarded there), the URLs name the
	// platform-wide address, not b's listener.
	req, _ := http.NewRequest("GET", api.URL+fmt.Sprintf("/v1/sandboxes/%s/preview-urls/%d", id, previewPort), nil)
	req.Header.Set("Authorization", "Bearer "+api.Token)
	r, err := ptdtest.Send(nil, req)
	var u previewURLs
	if err != nil || r.Status != 200 || json.Unmarshal(r.Body, &u) != nil {
		t.Fatalf("preview-urls through the api: %v %d %s", err, r.Status, r.Body)
	}
	label := fmt.Sprintf("%d-%s", previewPort, strings.ToLower(strings.Replace(id, "_", "", 1)))
	if u.PathURL != fmt.Sprintf("http://localhost:%s/%s/%d/", apiPort, id, previewPort) || u.URL != fmt.Sprintf("http://%s.localhost:%s/", label, apiPort) {
		t.Fatalf("preview URLs %q %q, want the platform-wide address localhost:%s", u.URL, u.PathURL, apiPort)
	}
	auth := map[string]string{"X-Pt-Preview-Token": u.Token}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	for _, entry := range []*ptdtest.Daemon{a, api} {
		name := map[*ptdtest.Daemon]string{a: "host a", api: "api"}[entry]
		t.Run("preview through "+name, func(t *testing.T) {
			got := pdo(t, hc, "GET", entry.PreviewURL+"/"+id+"/8080/hello", nil, auth)
			if got.status != 200 || !strings.HasPrefix(got.body, "hello from GET /hello") || !strings.Contains(got.body, `token=""`) {
				t.Fatalf("path form: %d %s", got.status, got.body)
			}
			hreq, _ := http.NewRequest("GET", entry.PreviewURL+"/hello?x=1", nil)
			hreq.Host = label + ".localhost:" + apiPort
			hreq.Header.Set("X-Pt-Preview-Token", u.Token)
			hr, err := ptdtest.Send(hc, hreq)
			if err != nil || hr.Status != 200 || !strings.HasPrefix(string(hr.Body), "hello from GET /hello?x=1 ") {
				t.Fatalf("host form: %v %d %s", err, hr.Status, hr.Body)
			}
			if got := pdo(t, hc, "GET", entry.PreviewURL+"/"+id+"/8080/hello", nil, nil); got.status != 401 {
				t.Fatalf("without a token: %d %s, want 401", got.status, got.body)
			}
			if got := pdo(t, hc, "GET", entry.PreviewURL+"/"+id+"/8080/hello", nil, map[string]string{"X-Pt-Preview-Token": u.Token + "x"}); got.status != 401 {
				t.Fatalf("with a bad token: %d %s, want 401", got.status, got.body)
			}
			// The browser link: the token moves into a cookie on the
			// platform's address.
			got = pdo(t, hc, "GET", entry.PreviewURL+"/"+id+"/8080/hello?pt_token="+u.Token, nil, nil)
			if got.status != http.StatusTemporaryRedirect || !strings.Contains(got.header.Get("Set-Cookie"), "pt_preview_token=") {
				t.Fatalf("browser link: %d %v %s", got.status, got.header, got.body)
			}
			// gRPC stays HTTP/2 on every hop: into this listener, between
			// the ptds and into the sandbox.
			greq, _ := http.NewRequest("POST", entry.PreviewURL+"/"+id+"/8080/grpc", strings.NewReader("ping"))
			greq.Header.Set("Content-Type", "application/grpc")
			greq.Header.Set("TE", "trailers")
			greq.Header.Set("X-Pt-Preview-Token", u.Token)
			gresp, err := upstream.H2C(&http.Transport{}).RoundTrip(greq)
			if err != nil {
				t.Fatalf("gRPC over h2c: %v", err)
			}
			gbody, _ := io.ReadAll(gresp.Body)
			gresp.Body.Close()
			if string(gbody) != "HTTP/2 got ping" || gresp.Trailer.Get("Grpc-Status") != "0" {
				t.Fatalf("gRPC over h2c: %d %q, trailer %v; want HTTP/2 to the sandbox and its trailer back", gresp.StatusCode, gbody, gresp.Trailer)
			}
			for _, form := range []struct{ host, path string }{{label + ".localhost", "/ws"}, {"localhost", "/" + id + "/8080/ws"}} {
				ws := dialWSAt(t, entry.PreviewURL, form.host, form.path, u.Token)
				for i, msg := range []string{"hello", strings.Repeat("y", 70000)} {
					ws.write(t, msg)
					if got := ws.read(t); got != msg {
						t.Fatalf("%s echo %d: got %d bytes, want %d", form.path, i, len(got), len(msg))
					}
				}
				ws.conn.Close()
			}
		})
		t.Run("ssh through "+name, func(t *testing.T) {
			out, errOut, code := sshAt(t, entry.SSHAddr, key, id, "", "echo relayed-$((6*7))")
			if code != 0 || out != "relayed-42\n" {
				t.Fatalf("ssh exec: %d %q %q", code, out, errOut)
			}
			if _, errOut, code := sshAt(t, entry.SSHAddr, key, id, "", "exit 7"); code != 7 {
				t.Fatalf("ssh exit code: %d %q, want 7", code, errOut)
			}
			if out, _, code := sshAt(t, entry.SSHAddr, key, id, "piped\n", "cat"); code != 0 || out != "piped\n" {
				t.Fatalf("ssh stdin: %d %q", code, out)
			}
			// scp runs the sftp subsystem through the relay.
			local := filepath.Join(t.TempDir(), "up.txt")
			if err := os.WriteFile(local, []byte("via-scp "+name+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			host, port, _ := net.SplitHostPort(entry.SSHAddr)
			if _, errOut, code := runTool(t, "", "scp", append(append([]string{"-P", port}, sshOpts(key)...), local, id+"@"+host+":/root/scp.txt")...); code != 0 {
				t.Fatalf("scp: %d %q", code, errOut)
			}
			if out, _, code := sshAt(t, entry.SSHAddr, key, id, "", "cat /root/scp.txt"); code != 0 || out != "via-scp "+name+"\n" {
				t.Fatalf("the file scp wrote: %d %q", code, out)
			}
			if !logLine(entry.Log(), "ssh login relayed", id, idB) {
				t.Fatalf("the entry's gateway logged no relay of %s to %s", id, idB)
			}
			other, _ := sshKey(t, "stranger")
			if out, errOut, code := sshAt(t, entry.SSHAddr, other, id, "", "echo", "in"); code != 255 || out != "" || !strings.Contains(errOut, "Permission denied") {
				t.Fatalf("a key the sandbox does not hold: %d %q %q, want refused", code, out, errOut)
			}
		})
	}

	t.Run("a relay by a key no ptd holds", func(t *testing.T) {
		// Straight to b's relay endpoint, naming the owner's key: the
		// relaying key must be a ptd's, whatever key it names.
		signer := sshSigner(t, key)
		_, err := sshRelay(b.URL, id, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))), signer)
		if err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
			t.Fatalf("relay with the client's own key: %v, want refused", err)
		}
	})

	t.Run("auto-resume through host a", func(t *testing.T) {
		if st, m := post(t, api, "/v1/sandboxes/"+id+"/stop?memory=true&wait_for_state=stopped", nil); st != 200 || m["state"] != "stopped" {
			t.Fatalf("stop: %d %v", st, m)
		}
		got := pdo(t, hc, "GET", a.PreviewURL+"/"+id+"/8080/hello", nil, auth)
		if got.status != 200 || !strings.HasPrefix(got.body, "hello from GET /hello") {
			t.Fatalf("preview of the stopped sandbox: %d %s", got.status, got.body)
		}
		if sb, err := cl.Sandboxes.Get(ctx, id); err != nil || sb.State != platinum.StateRunning || sb.HostID != idB {
			t.Fatalf("after the preview: %+v %v, want running on b", sb, err)
		}
	})

	t.Run("b down", func(t *testing.T) {
		b.Kill()
		got := pdo(t, hc, "GET", a.PreviewURL+"/"+id+"/8080/hello", nil, auth)
		if got.status != http.StatusServiceUnavailable || !strings.Contains(got.body, `"code":"unavailable"`) || got.header.Get("Retry-After") == "" {
			t.Fatalf("preview with b down: %d %v %s, want 503 unavailable", got.status, got.header, got.body)
		}
		if out, errOut, code := sshAt(t, api.SSHAddr, key, id, "", "echo", "in"); code != 255 || out != "" || !strings.Contains(errOut, "does not answer") {
			t.Fatalf("ssh with b down: %d %q %q", code, out, errOut)
		}
	})
}

// sshAt runs the real OpenSSH client as user against the gateway at addr.
func sshAt(t *testing.T, addr, key, user, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	return runTool(t, stdin, "ssh", append(append(append([]string{"-p", port}, sshOpts(key)...), user+"@"+host), args...)...)
}

// sshSigner reads the private key ssh-keygen wrote at path.
func sshSigner(t *testing.T, path string) ssh.Signer {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sshRelay opens a relayed SSH connection to the ptd at apiURL as
// another ptd would, naming userKey and authenticating with signer.
func sshRelay(apiURL, id, userKey string, signer ssh.Signer) (*ssh.Client, error) {
	addr := strings.TrimPrefix(apiURL, "http://")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: pt-ssh-relay\r\n%s: %s\r\n\r\n", sshgw.RelayPath, addr, sshgw.HeaderUserKey, userKey)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		c.Close()
		return nil, fmt.Errorf("relay upgrade: %s", resp.Status)
	}
	cc, chans, reqs, err := ssh.NewClientConn(&bufferedConn{c, br}, addr, &ssh.ClientConfig{User: id,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		c.Close()
		return nil, err
	}
	return ssh.NewClient(cc, chans, reqs), nil
}

// bufferedConn is a connection whose first bytes were read into r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
