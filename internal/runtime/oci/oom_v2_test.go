package oci

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWatchOOMv2 runs the cgroup v2 watch (production hosts; this
// machine's hierarchy is hybrid, so a directory holding the same files,
// written as the kernel writes them, stands in for the cgroup, and a
// script records what the runtime binary is asked): an oom_kill increment
// in memory.events is reported as the sandbox's kills; for a gVisor
// sandbox, memory.current climbing the guard's ladder pokes the guard
// (`kill ID SIGWINCH`) once per new rung, again after a fall and a new
// climb, never below half the sandbox's size; the watch ends when the
// cgroup goes.
func TestWatchOOMv2(t *testing.T) {
	dir := t.TempDir()
	cg := filepath.Join(dir, "cgroup")
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, v string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(cg, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	events := func(kills int) string {
		return fmt.Sprintf("low 0\nhigh 0\nmax 3\noom %d\noom_kill %d\noom_group_kill 0\n", kills, kills)
	}
	current := func(n int64) { write("memory.current", fmt.Sprintln(n)) }
	const mem = 256 << 20
	write("memory.events", events(2))
	current(40 << 20)
	calls := filepath.Join(dir, "calls")
	bin := filepath.Join(dir, "runsc")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"$@\" >> "+calls+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Runtime{binary: bin, gvisor: true, logger: slog.New(slog.DiscardHandler)}
	kills := make(chan OOMKill, 8)
	r.OnOOM(func(k OOMKill) { kills <- k })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.watchOOMv2(ctx, "sbx_1", cg, newOOMCount(cg), mem) }()

	pokes := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "kill sbx_1 28\n")
	}
	waitPokes := func(what string, want int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); pokes() != want; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d pokes of the guard, want %d", what, pokes(), want)
			}
		}
	}
	// A second of polls below half the size: no poke.
	time.Sleep(oomV2Poll + oomV2Poll/2)
	if n := pokes(); n != 0 {
		t.Fatalf("below half the size: %d pokes, want none", n)
	}
	current(mem/2 + 1) // rung 0
	waitPokes("past half the size", 1)
	current(mem/2 + guardStep(mem) + 1) // rung 1
	waitPokes("a rung higher", 2)
	write("memory.events", events(5))
	select {
	case k := <-kills:
		if k.ID != "sbx_1" || k.Count != 3 || !k.Sandbox {
			t.Fatalf("OOM report %+v, want 3 kills of gVisor sandbox sbx_1", k)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no OOM report 10 s after memory.events counted kills")
	}
	current(10 << 20)
	time.Sleep(oomV2Poll + oomV2Poll/2)
	current(mem/2 + 1)
	waitPokes("climbing again after a fall", 3)

	if err := os.RemoveAll(cg); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the watch of a removed cgroup ended with %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end 10 s after its cgroup went")
	}
	if n := pokes(); n != 3 {
		t.Fatalf("%d pokes in all, want 3", n)
	}
}

// TestEndedForMemory: on cgroup v2 the kernel itself kills a gVisor
// sandbox past memory.max, and its exit watch sees the end before the OOM
// watch's next read of memory.events. The end is then reported as the
// OOM kill it was, once (the OOM watch finds nothing left to report);
// a runc container's kill is reported before its exit, which is still
// reported; an end with no new kill is a plain exit.
func TestEndedForMemory(t *testing.T) {
	for _, tc := range []struct {
		name       string
		gvisor     bool
		kills      int
		wantMemory bool
	}{
		{"gvisor killed for memory", true, 1, true},
		{"gvisor ended otherwise", true, 0, false},
		{"runc init killed for memory", false, 2, false},
		{"runc ended otherwise", false, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg := t.TempDir()
			events := func(kills int) {
				t.Helper()
				b := fmt.Sprintf("low 0\nhigh 0\nmax 3\noom %d\noom_kill %d\noom_group_kill 0\n", kills, kills)
				if err := os.WriteFile(filepath.Join(cg, "memory.events"), []byte(b), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			events(4)
			r := &Runtime{gvisor: tc.gvisor, logger: slog.New(slog.DiscardHandler)}
			var reported []OOMKill
			r.OnOOM(func(k OOMKill) { reported = append(reported, k) })
			count := newOOMCount(cg)
			r.oom.counts.Store("sbx_1", count)
			events(4 + tc.kills)

			if got := r.endedForMemory("sbx_1"); got != tc.wantMemory {
				t.Errorf("endedForMemory = %v, want %v", got, tc.wantMemory)
			}
			if tc.kills == 0 {
				if len(reported) != 0 {
					t.Errorf("reported %+v with no new kill", reported)
				}
				return
			}
			if len(reported) != 1 || reported[0].ID != "sbx_1" || reported[0].Count != tc.kills || reported[0].Sandbox != tc.gvisor {
				t.Fatalf("reported %+v, want one report of %d kills (sandbox %v)", reported, tc.kills, tc.gvisor)
			}
			if n := count.claim(); n != 0 {
				t.Errorf("the OOM watch would report %d kills again", n)
			}
		})
	}
	if (&Runtime{}).endedForMemory("sbx_unwatched") {
		t.Error("a container with no v2 memory watch ended for memory")
	}
}

// TestExitWatchSaysMemoryEnd: the exit watch of a gVisor sandbox whose
// cgroup v2 counted a new OOM kill as it ended reports that kill and no
// exit; with no new kill it reports the exit. (The sandbox is a process
// named as runsc's is, with runsc's state file beside it.)
func TestExitWatchSaysMemoryEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		killed bool
	}{{"killed for memory", true}, {"ended otherwise", false}} {
		t.Run(tc.name, func(t *testing.T) {
			const id = "sbx_exitoom"
			sb := exec.Command("/bin/sh", "-c", "sleep 600", "boot", id)
			if err := sb.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sb.Process.Kill(); sb.Wait() })
			root, cg := t.TempDir(), t.TempDir()
			writeJSON(t, filepath.Join(root, id+"_sandbox:"+id+".state"), map[string]any{
				"id": id, "status": "running", "sandbox": map[string]any{"id": id, "pid": sb.Process.Pid}})
			writeFile(t, filepath.Join(cg, "memory.events"), "oom 0\noom_kill 0\n")

			r := &Runtime{cfg: Config{Root: root}, binary: "/bin/false", gvisor: true, logger: slog.New(slog.DiscardHandler)}
			kills, exits := make(chan OOMKill, 4), make(chan Exit, 4)
			r.OnOOM(func(k OOMKill) { kills <- k })
			r.OnExit(func(e Exit) { exits <- e })
			r.oom.counts.Store(id, newOOMCount(cg))
			r.watchExit(id)
			t.Cleanup(func() { r.unwatchExit(id) })

			if tc.killed {
				writeFile(t, filepath.Join(cg, "memory.events"), "oom 3\noom_kill 3\n")
			}
			sb.Process.Kill()
			sb.Wait()
			select {
			case k := <-kills:
				if !tc.killed || k.ID != id || k.Count != 3 || !k.Sandbox {
					t.Fatalf("OOM report %+v (killed for memory: %v)", k, tc.killed)
				}
			case e := <-exits:
				if tc.killed {
					t.Fatalf("exit %+v reported for a sandbox killed for memory", e)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("neither an OOM kill nor an exit reported 10 s after the sandbox ended")
			}
			select {
			case k := <-kills:
				t.Fatalf("a second report %+v", k)
			case e := <-exits:
				t.Fatalf("a second report %+v", e)
			case <-time.After(200 * time.Millisecond):
			}
		})
	}
}
