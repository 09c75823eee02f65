package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/pgtest"
	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/testenv"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestHostsShareAStore: two ptd processes on one PostgreSQL store (two
// hosts of one platform, on one machine) each register their host and
// heartbeat; either one's GET /v1/hosts shows both with capacity and
// load; a drain set through one is what the other's creates obey (503
// capacity, reason host_draining, nothing created); a host killed with
// SIGKILL is marked lost by the survivor within the bound and its running
// sandbox failed with reason host_lost (while it lived, the other ptd's
// loops left that sandbox alone); restarted, it registers again under the
// next generation, frees the copy it still ran, and a start boots the
// sandbox from its disk with its files.
func TestHostsShareAStore(t *testing.T) {
	requireEnv(t)
	_, err := pgtest.BinDir()
	testenv.Require(t, err == nil, fmt.Sprint(err))
	fast := []string{"--pids-limit", "256", "--host-heartbeat", "200ms", "--host-lost-after", "2s",
		"--reconcile-interval", "1s", "--timer-interval", "500ms"}
	a := startNamed(t, "a", ptdtest.Options{Store: "postgres", ExtraArgs: fast})
	b := startNamed(t, "b", ptdtest.Options{Store: "sqlite", KeysFrom: a.DataDir, ExtraArgs: append(fast, "--store", a.StoreURL, "--region", "test-b")})

	call := func(d *ptdtest.Daemon, method, path string, body any) (int, map[string]any) {
		t.Helper()
		var js []byte
		if body != nil {
			js, _ = json.Marshal(body)
		}
		req, err := http.NewRequest(method, d.URL+path, bytes.NewReader(js))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+d.Token)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	hostsOf := func(d *ptdtest.Daemon) map[string]map[string]any {
		t.Helper()
		st, m := call(d, "GET", "/v1/hosts", nil)
		if st != 200 {
			t.Fatalf("GET /v1/hosts: %d %v", st, m)
		}
		out := map[string]map[string]any{}
		for _, r := range m["rows"].([]any) {
			row := r.(map[string]any)
			out[row["id"].(string)] = row
		}
		return out
	}
	idA, idB := hostIDOf(t, a), hostIDOf(t, b)
	// waitFor polls a's view of host id until cond holds.
	waitFor := func(id, what string, cond func(map[string]any) bool) map[string]any {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			h := hostsOf(a)[id]
			if h != nil && cond(h) {
				return h
			}
			if time.Now().After(deadline) {
				t.Fatalf("host %s never %s: %v", id, what, h)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	for _, d := range []*ptdtest.Daemon{a, b} {
		hs := hostsOf(d)
		if len(hs) != 2 {
			t.Fatalf("%s sees %d hosts, want 2: %v", d.URL, len(hs), hs)
		}
		for _, id := range []string{idA, idB} {
			h := hs[id]
			if h["state"] != "active" || h["generation"] != float64(1) {
				t.Fatalf("host %s = %v, want active at generation 1", id, h)
			}
			c, _ := h["capacity"].(map[string]any)
			if c == nil || c["cpu"].(float64) < 1 || c["ram_mb"].(float64) < 256 || len(c["runtime_classes"].([]any)) == 0 {
				t.Fatalf("host %s capacity = %v", id, c)
			}
			if _, ok := h["load"].(map[string]any); !ok {
				t.Fatalf("host %s has no load: %v", id, h)
			}
		}
		// Each ptd shows its own host's runtime classes in full.
		if _, ok := hs[hostIDOf(t, d)]["lxcfs"]; !ok {
			t.Fatalf("%s's own host row lacks its runtime details: %v", d.URL, hs[hostIDOf(t, d)])
		}
	}
	if hostsOf(a)[idB]["region"] != "test-b" {
		t.Fatalf("host b's region = %v, want test-b", hostsOf(a)[idB]["region"])
	}
	// Heartbeats move.
	first := hostsOf(a)[idB]["heartbeat_at"]
	waitFor(idB, "heartbeated again", func(h map[string]any) bool { return h["heartbeat_at"] != first })

	// A drain is an admin's, through either process, and binds the other:
	// a create through a draining host's ptd is placed on the other host,
	// and with both draining it is refused.
	if st, m := call(a, "POST", "/v1/hosts/"+idB+"/drain", nil); st != 200 || m["state"] != "draining" {
		t.Fatalf("drain b through a: %d %v", st, m)
	}
	st, m := call(b, "POST", "/v1/sandboxes", map[string]any{"template": "busybox"})
	if st != 201 || m["host_id"] != idA {
		t.Fatalf("create through draining b: %d %v, want 201 placed on a", st, m)
	}
	if st, _ := call(b, "DELETE", "/v1/sandboxes/"+m["id"].(string), nil); st != 202 {
		t.Fatalf("delete the placed sandbox through b: %d", st)
	}
	sandboxesBefore := creatingCount(t, call, b)
	if st, m := call(b, "POST", "/v1/hosts/"+idA+"/drain", nil); st != 200 || m["state"] != "draining" {
		t.Fatalf("drain a through b: %d %v", st, m)
	}
	st, m = call(b, "POST", "/v1/sandboxes", map[string]any{"template": "busybox"})
	if st != 503 || m["code"] != "capacity" || m["reason"] != "host_draining" {
		t.Fatalf("create with every host draining: %d %v, want 503 capacity host_draining", st, m)
	}
	if n := creatingCount(t, call, b); n != sandboxesBefore {
		t.Fatalf("a refused create left %d sandboxes, had %d", n, sandboxesBefore)
	}
	if st, m := call(b, "POST", "/v1/hosts/"+idB+"/drain", nil); st != 200 || m["state"] != "draining" {
		t.Fatalf("drain again: %d %v, want 200 draining", st, m)
	}
	if st, m := call(a, "POST", "/v1/hosts/host_nope/drain", nil); st != 404 || m["code"] != "not_found" {
		t.Fatalf("drain an unknown host: %d %v, want 404", st, m)
	}
	if st, m := call(b, "POST", "/v1/hosts/"+idB+"/undrain", nil); st != 200 || m["state"] != "active" {
		t.Fatalf("undrain: %d %v", st, m)
	}

	// A sandbox on b (a still drains, so placement takes b), with a file
	// on its disk. a's loops (reconciler, timers, disposal) leave b's
	// sandbox alone: it stays running.
	ctx := context.Background()
	clB := platinum.New(b.URL, b.Token)
	sb, err := clB.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"}, platinum.WaitForRunning(2*time.Minute))
	if err != nil {
		t.Fatalf("create on b: %v", err)
	}
	if sb.HostID != idB {
		t.Fatalf("created with a draining on %s, want b (%s)", sb.HostID, idB)
	}
	if st, m := call(a, "POST", "/v1/hosts/"+idA+"/undrain", nil); st != 200 || m["state"] != "active" {
		t.Fatalf("undrain a: %d %v", st, m)
	}
	t.Cleanup(func() { clB.Sandboxes.Delete(context.Background(), sb.ID) })
	if res, err := clB.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: "echo kept > /keep.txt && sync"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("write on b's sandbox: %+v %v", res, err)
	}
	if st, m := call(a, "GET", "/v1/sandboxes/"+sb.ID, nil); st != 200 || m["host_id"] != nil && m["host_id"] != idB {
		t.Fatalf("b's sandbox through a: %d %v", st, m)
	}
	time.Sleep(3 * time.Second) // several of a's reconciler and timer passes
	if st, m := call(a, "GET", "/v1/sandboxes/"+sb.ID, nil); st != 200 || m["state"] != "running" {
		t.Fatalf("b's sandbox after a's reconciler passes: %d %v, want still running", st, m)
	}

	// b dies without a word; a marks it lost within the bound.
	b.Kill()
	lost := waitFor(idB, "lost", func(h map[string]any) bool { return h["state"] == "lost" })
	if lost["state_reason"] == nil || lost["generation"] != float64(1) {
		t.Fatalf("lost host = %v, want a reason at generation 1", lost)
	}
	if st, m := call(a, "POST", "/v1/hosts/"+idB+"/undrain", nil); st != 409 {
		t.Fatalf("undrain a lost host: %d %v, want 409", st, m)
	}
	if hostsOf(a)[idA]["state"] != "active" {
		t.Fatalf("a, alive, is %v", hostsOf(a)[idA])
	}
	// Its sandbox is shown as what it is: failed, host_lost, not running.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, m := call(a, "GET", "/v1/sandboxes/"+sb.ID, nil)
		if st == 200 && m["state"] == "failed" && m["reason"] == "host_lost" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lost host's sandbox through a: %d %v, want failed host_lost", st, m)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Back, it registers again: the next generation, active. Its sweep
	// frees the copy it still ran (the record says failed), keeping the
	// disk; a start boots it again with the file there.
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(idB, "active again at generation 2", func(h map[string]any) bool {
		return h["state"] == "active" && h["generation"] == float64(2)
	})
	deadline = time.Now().Add(90 * time.Second)
	for !logLine(b.Log(), "swept host resources", sb.ID) {
		if time.Now().After(deadline) {
			t.Fatalf("b never released its stale copy of %s", sb.ID)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got, err := clB.Sandboxes.Get(ctx, sb.ID); err != nil || got.State != platinum.StateFailed {
		t.Fatalf("after b's return: %+v %v, want still failed", got, err)
	}
	if _, err := clB.Sandboxes.Start(ctx, sb.ID, platinum.WaitForRunning(2*time.Minute)); err != nil {
		t.Fatalf("start after the host came back: %v", err)
	}
	res, err := clB.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Shell: "cat /keep.txt"})
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "kept" {
		t.Fatalf("the file after the host came back: %+v %v", res, err)
	}
}

// hostIDOf is the host ID ptd d keeps in its data dir.
func hostIDOf(t *testing.T, d *ptdtest.Daemon) string {
	b, err := os.ReadFile(filepath.Join(d.DataDir, "host-id"))
	if err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSpace(b))
}

// creatingCount is how many sandboxes d lists.
func creatingCount(t *testing.T, call func(*ptdtest.Daemon, string, string, any) (int, map[string]any), d *ptdtest.Daemon) int {
	st, m := call(d, "GET", "/v1/sandboxes?paginated=true", nil)
	if st != 200 {
		t.Fatalf("list: %d %v", st, m)
	}
	return int(m["total"].(float64))
}
