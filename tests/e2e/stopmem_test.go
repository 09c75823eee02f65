package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestStopSnapshotMemoryTravels (docs/ARCHITECTURE.md, "Stop snapshots"):
// on two hosts, a gVisor sandbox stopped on b has its checkpoint (memory
// and processes) in its stop snapshot; once b dies and is marked lost, a
// start through a restores it there with its processes running (a
// background sleep, a counter living in a shell's memory, /tmp) and
// restore "memory". A second sandbox whose stop snapshot's memory image
// is gone from the object store starts cold from the disk instead
// (disk_only, the reason in last_start, a start_ram_not_restored event).
func TestStopSnapshotMemoryTravels(t *testing.T) {
	requireEnv(t)
	objects := t.TempDir()
	ds := startHosts(t, 2, "--pids-limit", "256", "--host-heartbeat", "200ms", "--host-lost-after", "3s", "--objects", objects)
	a, b := ds[0], ds[1]
	idA, idB := hostIDOf(t, a), hostIDOf(t, b)
	ctx := context.Background()
	cl := platinum.New(a.URL, a.Token)

	if _, err := cl.Hosts.Drain(ctx, idA); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 {
		st, m := post(t, a, "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=120000", map[string]any{"template": "busybox", "runtime": "gvisor"})
		if st != 201 || m["host_id"] != idB {
			cl.Hosts.Undrain(ctx, idA)
			t.Fatalf("create the gVisor sandbox with a draining: %d %v, want it on b (%s)", st, m, idB)
		}
		id := m["id"].(string)
		t.Cleanup(func() { cl.Sandboxes.Delete(context.Background(), id) })
		ids = append(ids, id)
	}
	if _, err := cl.Hosts.Undrain(ctx, idA); err != nil {
		t.Fatal(err)
	}
	moved, cold := ids[0], ids[1]
	sh := func(id, cmd string) platinum.ExecResult {
		t.Helper()
		res, err := cl.Sandboxes.Exec(ctx, id, platinum.ExecRequest{Shell: cmd})
		if err != nil {
			t.Fatalf("exec %q in %s: %v", cmd, id, err)
		}
		return *res
	}
	for _, id := range ids {
		// The pid file is on the disk, so a cold boot still has it; the
		// counter's value lives in the shell's memory (and /tmp).
		sh(id, `sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > /root/sleep.pid`)
		sh(id, `(i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done) </dev/null >/dev/null 2>&1 &`)
		sh(id, `echo disk > /root/disk.txt; sync`)
	}
	// sleeping prints the command line of the process the pid file names
	// (a cold boot may give its pid to another process).
	const sleeping = `tr '\0' ' ' < /proc/"$(cat /root/sleep.pid)"/cmdline 2>/dev/null | grep '^sleep 1000'`
	waitCount := func(id string, above int) int {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			n, err := strconv.Atoi(strings.TrimSpace(sh(id, "cat /tmp/count 2>/dev/null").Stdout))
			if err == nil && n > above {
				return n
			}
			if time.Now().After(deadline) {
				t.Fatalf("the counter in %s never passed %d", id, above)
			}
		}
	}
	before := waitCount(moved, 2)
	for _, id := range ids {
		if st, m := post(t, a, "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped", nil); st != 200 {
			t.Fatalf("stop %s: %d %v", id, st, m)
		}
	}
	stopSnaps := map[string]platinum.Snapshot{}
	for deadline := time.Now().Add(2 * time.Minute); len(stopSnaps) < len(ids); time.Sleep(200 * time.Millisecond) {
		for _, id := range ids {
			bks, _ := cl.Sandboxes.ListBackups(ctx, id)
			for _, bk := range bks {
				if bk.Name == "pt:stop" && bk.State == platinum.SnapshotReady {
					stopSnaps[id] = bk
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("stop snapshots: %+v, want one ready for each of %v", stopSnaps, ids)
		}
	}
	for id, bk := range stopSnaps {
		if !bk.Memory {
			t.Fatalf("the stop snapshot of gVisor sandbox %s: %+v, want it to hold memory", id, bk)
		}
	}
	// The second one's memory image goes missing from the object store.
	idx := filepath.Join(objects, "platinum-archives", "backups", stopSnaps[cold].ID+".memory.json")
	if matches, _ := filepath.Glob(filepath.Join(objects, "*", "backups", stopSnaps[cold].ID+".memory.json")); len(matches) == 1 {
		idx = matches[0]
	}
	if err := os.Remove(idx); err != nil {
		t.Fatalf("remove the memory index from the object store: %v", err)
	}

	// b dies without a word; its stopped sandboxes start on a once b is lost.
	b.Kill()
	start := func(id string) *platinum.Sandbox {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
			got, err := cl.Sandboxes.Start(ctx, id, platinum.WaitForRunning(2*time.Minute))
			if err == nil && got.State == platinum.StateRunning {
				return got
			}
			var ae *platinum.APIError
			if !errors.As(err, &ae) || ae.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
				t.Fatalf("start %s of the lost host: %+v %v", id, got, err)
			}
		}
	}
	got := start(moved)
	ls, err := got.LastStart()
	if got.HostID != idA || err != nil || ls == nil || ls.Restore != platinum.RestoreMemory || !ls.RAMRestored || !strings.Contains(ls.Reason, stopSnaps[moved].ID) {
		t.Fatalf("start of b's stopped gVisor sandbox: host %s, last start %+v %v; want memory on a (%s) from %s", got.HostID, ls, err, idA, stopSnaps[moved].ID)
	}
	if res := sh(moved, sleeping); strings.TrimSpace(res.Stdout) != "sleep 1000" {
		t.Fatalf("the background sleep after the start elsewhere: %+v, want it running", res)
	}
	if n := waitCount(moved, before); n <= before {
		t.Fatalf("the counter went back to %d from %d", n, before)
	}
	if res := sh(moved, "cat /root/disk.txt"); strings.TrimSpace(res.Stdout) != "disk" {
		t.Fatalf("the disk after the start elsewhere: %+v", res)
	}

	got = start(cold)
	ls, err = got.LastStart()
	if got.HostID != idA || err != nil || ls == nil || ls.Restore != platinum.RestoreDiskOnly || ls.RAMRestored || !strings.Contains(ls.Reason, "memory was not restored") {
		t.Fatalf("start of the sandbox whose memory image is gone: host %s, last start %+v %v; want disk_only on a saying why", got.HostID, ls, err)
	}
	if res := sh(cold, sleeping+"; cat /root/disk.txt"); strings.TrimSpace(res.Stdout) != "disk" {
		t.Fatalf("the cold-booted sandbox: %+v, want its disk and no old process", res)
	}
	if rows := eventsOf(t, a, cold, "start_ram_not_restored"); rows == 0 {
		t.Fatal("no start_ram_not_restored event for the cold start elsewhere")
	}
}

// eventsOf counts sandbox id's events of type typ through d's API.
func eventsOf(t *testing.T, d *ptdtest.Daemon, id, typ string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", d.URL+"/v1/events?format=json&type="+typ+"&sandbox_id="+id, nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	r, err := ptdtest.Send(nil, req)
	if err != nil || r.Status != 200 {
		t.Fatalf("GET events: %v %+v", err, r)
	}
	var out struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("GET events: %v: %s", err, r.Body)
	}
	return len(out.Rows)
}
