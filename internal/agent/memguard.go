package agent

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// MemoryGuard is the OOM killer of a gVisor sandbox beside gVisor's own.
// Upstream gVisor has none: its guest may allocate past the memory it
// reports (MemTotal, the sandbox's size), until the host cgroup holding
// the whole sandbox — the Sentry, its gofer and the guest's memory — is
// full, and then the host kills the Sentry: every process of the sandbox
// dies. The runsc scripts/setup.sh builds (third_party/gvisor) keeps the
// guest's anonymous memory within MemTotal and kills at that limit itself;
// the guard reports those kills (/proc/vmstat's oom_kill) and covers what
// that limit does not count (shared memory, and runsc without the patch):
// it watches the guest's own accounting and, as Linux's OOM killer does
// inside a runc sandbox's cgroup, kills the process using the most memory
// once the guest's unreclaimable memory (anonymous and shared pages)
// passes MemTotal; the host cgroup is sized above MemTotal for the
// Sentry's own overhead, so the guard acts before the host has to.
//
// Without the patch, a process that grows a system call at a time is seen
// and killed between two of them, but one system call that asks for more
// than the sandbox has (a read of 512 MB into fresh memory) stalls every
// other guest task that touches a new page or reads /proc/meminfo, the
// guard too, so the guard sees it only when the call returns and its kill
// races the process's exit; docs/ARCHITECTURE.md ("Where gvisor differs")
// has the numbers. The guard reports every kill for the host to turn into
// an oom_killed event.
type MemoryGuard struct {
	proc string // "/proc"; tests point it elsewhere
	self int    // never killed: pt-agent itself
	kill func(pid int) error

	// idle is the poll interval while memory is at most half used;
	// poke wakes the guard at once (Poke).
	idle time.Duration
	poke chan struct{}

	mu     sync.Mutex
	kills  []OOMKill
	wake   chan struct{} // closed and replaced at each kill
	victim int           // the last victim while it is still exiting

	// acked is the highest seq a GET /oom has acknowledged (its after):
	// a poll without one, a new ptd's first, gets the kills after it.
	acked uint64

	// kernelKills is the last reading of the guest kernel's own OOM kill
	// count (/proc/vmstat's oom_kill), which starts at 0 with the kernel:
	// a Sentry with a memory limit (the runsc scripts/setup.sh builds)
	// kills at its limit itself, and the guard reports those kills as the
	// kernel's.
	kernelKills int64
}

// OOMKill is one process the guard killed.
type OOMKill struct {
	Seq uint64 `json:"seq"`
	// Source is who killed: "guard", or "kernel" (gVisor's own OOM
	// killer, which names no process: PID, Command, RSSBytes and UsedMB
	// are then zero).
	Source   string    `json:"source"`
	PID      int       `json:"pid,omitempty"`
	Command  string    `json:"command,omitempty"`
	RSSBytes uint64    `json:"rss_bytes,omitempty"`
	UsedMB   uint64    `json:"used_mb,omitempty"` // the guest's anonymous and shared memory then
	LimitMB  uint64    `json:"limit_mb"`          // MemTotal
	At       time.Time `json:"at"`
}

// NewMemoryGuard returns a guard over this sandbox's /proc. With poked,
// the host pokes the guard (Poke) whenever the sandbox's memory on the host
// grows past half the sandbox's size and by every step above that (the
// runtime's OOM watcher, internal/runtime/oci/oom_linux.go), and whenever
// the sandbox stalls at its host limit; the guard then needs no fast poll
// while memory is low, only a rare one in case a poke is lost.
func NewMemoryGuard(poked bool) *MemoryGuard {
	idle := slowPoll
	if poked {
		idle = pokedPoll
	}
	return &MemoryGuard{proc: "/proc", self: os.Getpid(), wake: make(chan struct{}), idle: idle, poke: make(chan struct{}, 1),
		kill: func(pid int) error { return unix.Kill(pid, unix.SIGKILL) }}
}

// Guard intervals: the guard reads /proc/meminfo every fastPoll while
// memory is more than half used, and otherwise every slowPoll, or every
// pokedPoll when the host pokes it. Reading /proc/meminfo is not cheap in
// gVisor (the Sentry walks its memory file to count what is in use), so
// the idle poll is most of what pt-agent costs an idle sandbox.
const (
	fastPoll  = 20 * time.Millisecond
	slowPoll  = 100 * time.Millisecond
	pokedPoll = 30 * time.Second
	// firstPoll is the first read's delay: at boot nothing has grown yet,
	// and the read would compete with the agent's own start (a cold
	// create waits for that), so a poke or this delay comes first.
	firstPoll = slowPoll
	// pokeLinger is how long the guard polls fast after a poke.
	pokeLinger = 2 * time.Second
	// maxKept bounds the kills remembered for the host.
	maxKept = 64
)

// Poke makes the guard check the guest's memory now. It never blocks.
func (g *MemoryGuard) Poke() {
	select {
	case g.poke <- struct{}{}:
	default:
	}
}

// PokeSignal is how the host pokes the guard: SIGWINCH to pt-agent, the
// sandbox's PID 1. Its default action is to be ignored, so a poke can
// never end an agent (or another init) that does not expect one.
const PokeSignal = unix.SIGWINCH

// PokeOnSignal pokes the guard at every PokeSignal this process receives,
// until ctx ends.
func (g *MemoryGuard) PokeOnSignal(ctx context.Context) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, PokeSignal)
	go func() {
		defer signal.Stop(sigs)
		for {
			select {
			case <-sigs:
				g.Poke()
			case <-ctx.Done():
				return
			}
		}
	}()
}

// Run checks the guest's memory until ctx ends.
func (g *MemoryGuard) Run(ctx context.Context) {
	if g.idle == 0 {
		g.idle = slowPoll
	}
	t := time.NewTimer(firstPoll)
	defer t.Stop()
	var poked time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-g.poke: // nil outside NewMemoryGuard: never
			t.Stop()
			poked = time.Now()
		}
		used, total, err := g.usage()
		g.readKernelKills(total)
		next := g.idle
		if time.Since(poked) < pokeLinger {
			// The memory that drew the poke may be gone by now, freed by
			// a kill of the guest's kernel: look again soon to report it.
			next = fastPoll
		}
		if err == nil && total > 0 {
			if used > total/2 {
				next = fastPoll
			}
			if used > total {
				g.killLargest(total)
			}
		}
		t.Reset(next)
	}
}

// usage returns the guest's anonymous and shared memory and MemTotal.
func (g *MemoryGuard) usage() (used, total uint64, err error) {
	m, err := readMeminfoAt(filepath.Join(g.proc, "meminfo"))
	if err != nil {
		return 0, 0, err
	}
	return m["AnonPages"] + m["Shmem"], m["MemTotal"], nil
}

// killLargest kills the process with the largest resident set (not
// pt-agent, not one whose oom_score_adj is -1000), unless the last victim
// is still exiting: its memory is about to come back. The reading that
// found the guest over MemTotal may be stale, so memory is read again once
// the victim is chosen and nothing is killed if it is back under. A
// process inside one huge system call stalls the guard's reading until the
// call returns, and may exit right after it (dd's one 512 MB read): the
// stale reading then picked the largest process left, an unrelated one —
// a sleep of 1 MB beside the dd, once in ten dd runs (docs/ARCHITECTURE.md,
// "Where gvisor differs").
func (g *MemoryGuard) killLargest(total uint64) {
	g.mu.Lock()
	if v := g.victim; v != 0 {
		if _, err := os.Stat(filepath.Join(g.proc, strconv.Itoa(v))); err == nil {
			g.mu.Unlock()
			return
		}
		g.victim = 0
	}
	g.mu.Unlock()
	pid, rss := g.largest()
	if pid == 0 {
		return
	}
	now, _, err := g.usage()
	if err != nil || now <= total {
		return
	}
	comm, _ := os.ReadFile(filepath.Join(g.proc, strconv.Itoa(pid), "comm"))
	if err := g.kill(pid); err != nil && !errors.Is(err, unix.ESRCH) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.victim = pid
	g.recordLocked(OOMKill{Source: "guard", PID: pid, Command: strings.TrimSpace(string(comm)), RSSBytes: rss,
		UsedMB: now >> 20, LimitMB: total >> 20})
}

// recordLocked keeps a kill for the host and wakes its waiters.
func (g *MemoryGuard) recordLocked(k OOMKill) {
	k.Seq = 1
	if n := len(g.kills); n > 0 {
		k.Seq = g.kills[n-1].Seq + 1
	}
	k.At = time.Now().UTC()
	g.kills = append(g.kills, k)
	if len(g.kills) > maxKept {
		g.kills = g.kills[len(g.kills)-maxKept:]
	}
	close(g.wake)
	g.wake = make(chan struct{})
}

// readKernelKills records the kills of the guest kernel's own OOM killer
// since the last reading. A reading lower than the last (a sandbox
// restored from a checkpoint counts from 0 again) only sets the count. A
// kernel without the counter (runsc without the memory limit) has no
// /proc/vmstat: nothing to read.
func (g *MemoryGuard) readKernelKills(total uint64) {
	b, err := os.ReadFile(filepath.Join(g.proc, "vmstat"))
	if err != nil {
		return
	}
	var n int64 = -1
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	if n < 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	last := g.kernelKills
	g.kernelKills = n
	for i := last; i < n; i++ {
		g.recordLocked(OOMKill{Source: "kernel", LimitMB: total >> 20})
	}
}

// largest returns the killable process with the largest resident set.
func (g *MemoryGuard) largest() (pid int, rss uint64) {
	entries, err := os.ReadDir(g.proc)
	if err != nil {
		return 0, 0
	}
	page := uint64(os.Getpagesize())
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == g.self || p == 1 {
			continue
		}
		dir := filepath.Join(g.proc, e.Name())
		if adj, err := os.ReadFile(filepath.Join(dir, "oom_score_adj")); err == nil && strings.TrimSpace(string(adj)) == "-1000" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "statm"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		if n*page > rss {
			pid, rss = p, n*page
		}
	}
	return pid, rss
}

// Kills returns the kills after seq (oldest first), waiting up to wait
// for one when there is none yet.
func (g *MemoryGuard) Kills(ctx context.Context, after uint64, wait time.Duration) []OOMKill {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		g.mu.Lock()
		var out []OOMKill
		for _, k := range g.kills {
			if k.Seq > after {
				out = append(out, k)
			}
		}
		wake := g.wake
		g.mu.Unlock()
		if len(out) > 0 || wait <= 0 {
			return out
		}
		select {
		case <-wake:
		case <-deadline.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// maxOOMWait bounds GET /oom's wait.
const maxOOMWait = 60 * time.Second

// ack records that the kills up to seq were received and returns the
// highest seq acknowledged so far.
func (g *MemoryGuard) ack(seq uint64) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.acked = max(g.acked, seq)
	return g.acked
}

// handleOOM answers GET /oom?after=SEQ&wait_ms=MS: the kills after SEQ,
// which acknowledges those up to it, waiting up to MS (at most a minute)
// for one. Without after, the kills after the last acknowledged: a ptd
// that starts watching the sandbox (a new one, or after a restart) gets
// every kill no earlier ptd received, however soon after the sandbox's
// boot they came. Without a guard (runc sandboxes: the host's kernel
// kills there) the list is always empty.
func (s *Server) handleOOM(w http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	ms, _ := strconv.Atoi(r.URL.Query().Get("wait_ms"))
	wait := min(time.Duration(max(ms, 0))*time.Millisecond, maxOOMWait)
	kills := []OOMKill{}
	if g := s.cfg.MemoryGuard; g != nil {
		if r.URL.Query().Has("after") {
			g.ack(after)
		} else {
			after = g.ack(0)
		}
		if k := g.Kills(r.Context(), after, wait); k != nil {
			kills = k
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"kills": kills, "guarded": s.cfg.MemoryGuard != nil})
}
