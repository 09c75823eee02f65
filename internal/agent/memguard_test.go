package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeProc writes a /proc with meminfo and processes (pid → resident
// pages, oom_score_adj).
func fakeProc(t *testing.T, anonKB, totalKB uint64, procs map[int][2]int) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "meminfo"), []byte(fmt.Sprintf("MemTotal: %d kB\nAnonPages: %d kB\nShmem: 0 kB\nCached: 9999999 kB\n", totalKB, anonKB)), 0o644)
	for pid, p := range procs {
		d := filepath.Join(dir, fmt.Sprint(pid))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "statm"), []byte(fmt.Sprintf("100000 %d 0 0 0 0 0\n", p[0])), 0o644)
		os.WriteFile(filepath.Join(d, "comm"), []byte(fmt.Sprintf("proc%d\n", pid)), 0o644)
		os.WriteFile(filepath.Join(d, "oom_score_adj"), []byte(fmt.Sprintf("%d\n", p[1])), 0o644)
	}
	return dir
}

// TestMemoryGuard: over MemTotal (page cache not counted) the guard kills
// the process with the largest resident set — never itself, PID 1 or a
// process with oom_score_adj -1000 — once, until that victim is gone; a
// waiter on GET /oom's Kills wakes with the kill. Under the limit it kills
// nothing.
func TestMemoryGuard(t *testing.T) {
	var mu sync.Mutex
	var killed []int
	procs := map[int][2]int{1: {900000, 0}, 7: {5000, 0}, 8: {60000, 0}, 9: {80000, -1000}, 42: {100, 0}}
	g := &MemoryGuard{self: 42, wake: make(chan struct{}), kill: func(pid int) error {
		mu.Lock()
		defer mu.Unlock()
		killed = append(killed, pid)
		return nil
	}}
	g.proc = fakeProc(t, 200*1024, 256*1024, procs) // under the limit
	used, total, err := g.usage()
	if err != nil || used != 200<<20 || total != 256<<20 {
		t.Fatalf("usage %d/%d %v", used, total, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.Run(ctx)
	time.Sleep(3 * slowPoll)
	if len(killed) != 0 {
		t.Fatalf("killed %v under the limit", killed)
	}
	got := make(chan []OOMKill, 1)
	go func() { got <- g.Kills(ctx, 0, 5*time.Second) }()
	// A 600 MB allocation in a 256 MB sandbox.
	os.WriteFile(filepath.Join(g.proc, "meminfo.new"), []byte("MemTotal: 262144 kB\nAnonPages: 614400 kB\nShmem: 0 kB\n"), 0o644)
	os.Rename(filepath.Join(g.proc, "meminfo.new"), filepath.Join(g.proc, "meminfo"))
	var kills []OOMKill
	select {
	case kills = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("no kill reported")
	}
	if len(kills) != 1 || kills[0].PID != 8 || kills[0].Command != "proc8" || kills[0].RSSBytes != 60000*uint64(os.Getpagesize()) ||
		kills[0].LimitMB != 256 || kills[0].UsedMB != 600 || kills[0].Seq != 1 {
		t.Fatalf("kills %+v, want pid 8 (the largest killable)", kills)
	}
	// The victim is still there (in this fake /proc): no second kill.
	time.Sleep(5 * fastPoll)
	mu.Lock()
	n := len(killed)
	mu.Unlock()
	if n != 1 {
		t.Errorf("killed %v while the first victim was still exiting", killed)
	}
	if k := g.Kills(ctx, 1, 0); len(k) != 0 {
		t.Errorf("kills after seq 1: %v", k)
	}
}

// TestMemoryGuardPoked: a guard the host pokes (NewMemoryGuard(true))
// polls only every pokedPoll while memory is low, so a jump over the limit
// goes unseen until a poke (PokeSignal to this process, as the host sends
// to pt-agent), which makes it look at once and kill.
func TestMemoryGuardPoked(t *testing.T) {
	killed := make(chan int, 4)
	g := NewMemoryGuard(true)
	g.self, g.kill = 42, func(pid int) error { killed <- pid; return nil }
	g.proc = fakeProc(t, 10*1024, 256*1024, map[int][2]int{7: {5000, 0}, 8: {60000, 0}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.Run(ctx)
	time.Sleep(3 * slowPoll) // the first look, at once, is under the limit
	os.WriteFile(filepath.Join(g.proc, "meminfo.new"), []byte("MemTotal: 262144 kB\nAnonPages: 614400 kB\nShmem: 0 kB\n"), 0o644)
	os.Rename(filepath.Join(g.proc, "meminfo.new"), filepath.Join(g.proc, "meminfo"))
	select {
	case pid := <-killed:
		t.Fatalf("killed %d before a poke: the idle poll is not pokedPoll", pid)
	case <-time.After(5 * slowPoll):
	}
	g.PokeOnSignal(ctx)
	if err := unix.Kill(os.Getpid(), PokeSignal); err != nil { // as the host does
		t.Fatal(err)
	}
	select {
	case pid := <-killed:
		if pid != 8 {
			t.Errorf("killed %d, want 8 (the largest)", pid)
		}
	case <-time.After(pokedPoll / 2):
		t.Fatal("no kill after a poke")
	}
}

// TestMemoryGuardStaleReading: a reading over MemTotal that is stale by
// the time the victim is chosen (the process that asked has exited, as dd
// does right after its one huge read) kills nothing; a fresh one over it
// kills the largest process.
func TestMemoryGuardStaleReading(t *testing.T) {
	for _, tc := range []struct {
		name   string
		nowKB  uint64 // the guest's memory when the victim is chosen
		killed []int
	}{
		{"back under the limit", 30 * 1024, nil},
		{"still over the limit", 300 * 1024, []int{8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var killed []int
			g := &MemoryGuard{self: 42, wake: make(chan struct{}), kill: func(pid int) error { killed = append(killed, pid); return nil }}
			g.proc = fakeProc(t, tc.nowKB, 256*1024, map[int][2]int{7: {5000, 0}, 8: {60000, 0}})
			g.killLargest(256 << 20) // after a stalled reading of 600 MB
			if fmt.Sprint(killed) != fmt.Sprint(tc.killed) {
				t.Errorf("killed %v, want %v", killed, tc.killed)
			}
		})
	}
}

// TestMemoryGuardKernelKills: kills by the guest's own kernel
// (/proc/vmstat's oom_kill) are reported as the kernel's; a count that falls (a restored sandbox) is a new
// start, not kills; a GET /oom without after gets the kills after the last
// one acknowledged.
func TestMemoryGuardKernelKills(t *testing.T) {
	g := NewMemoryGuard(true)
	g.proc = fakeProc(t, 10*1024, 256*1024, nil)
	vmstat := func(n int) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(g.proc, "vmstat"), []byte(fmt.Sprintf("nr_free_pages 1\noom_kill %d\n", n)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vmstat(0)
	g.readKernelKills(256 << 20)
	if k := g.Kills(context.Background(), 0, 0); len(k) != 0 {
		t.Fatalf("kills at oom_kill 0: %+v", k)
	}
	vmstat(2) // two kills before the guard's next look
	g.readKernelKills(256 << 20)
	k := g.Kills(context.Background(), 0, 0)
	if len(k) != 2 || k[0].Source != "kernel" || k[1].Seq != 2 || k[0].PID != 0 || k[0].LimitMB != 256 {
		t.Fatalf("kills %+v; want two by the kernel", k)
	}
	vmstat(0) // restored from a checkpoint
	g.readKernelKills(256 << 20)
	vmstat(1)
	g.readKernelKills(256 << 20)
	if k := g.Kills(context.Background(), 2, 0); len(k) != 1 || k[0].Seq != 3 {
		t.Fatalf("kills after a restore %+v; want one", k)
	}

	s := &Server{cfg: Config{MemoryGuard: g}}
	get := func(q string) (seqs []uint64) {
		t.Helper()
		w := httptest.NewRecorder()
		s.handleOOM(w, httptest.NewRequest("GET", "/oom?"+q, nil))
		var out struct{ Kills []OOMKill }
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		for _, k := range out.Kills {
			seqs = append(seqs, k.Seq)
		}
		return seqs
	}
	if got := get("wait_ms=0"); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Errorf("first poll, nothing acknowledged: %v", got)
	}
	if got := get("after=2&wait_ms=0"); !slices.Equal(got, []uint64{3}) {
		t.Errorf("after=2: %v", got)
	}
	if got := get("wait_ms=0"); !slices.Equal(got, []uint64{3}) {
		t.Errorf("a new ptd's first poll after 2 was acknowledged: %v; want 3", got)
	}
}
