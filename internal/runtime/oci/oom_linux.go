package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// oomStep is how much a stalled gVisor sandbox's host limit rises at a
// time, and oomStepWait how long the watcher gives the guard inside to
// kill the process that stalled it before the first rise (the guard
// polls every 20 ms past half full and is poked at the stall, see the
// guard's ladder below, but on a loaded host it may not run for a while). oomStepPace is the pause between two
// rises. A process stalled inside one huge system call keeps the guard
// from running until the call returns, so there the rises only let the
// call finish; smaller steps did not help (16 MiB: 7 of 15 such calls
// killed beside two busy loops, 64 MiB: 10 of 15).
const (
	oomStep     = 64 << 20
	oomStepWait = time.Second
	oomStepPace = 100 * time.Millisecond
	// oomV2Poll is how often a cgroup v2 memory.events is read.
	oomV2Poll = time.Second
)

// watchOOM sets up a watch of id's memory cgroup and returns the loop
// that runs it until ctx ends or the cgroup goes away. The setup, the kill
// counter's baseline included, is done before it returns, so a kill right
// after Run returns is counted (WatchOOM runs the loop on a goroutine); only
// gVisor's guard ladder, slow to register, is left to the loop.
// v1: an eventfd registered on memory.oom_control (cgroup.event_control)
// wakes it at each OOM; v2 has no such notification for a cgroup's own
// kills, so memory.events is read every oomV2Poll.
func (r *Runtime) watchOOM(ctx context.Context, id string) (func() error, error) {
	bundle := r.bundleOf(ctx, id)
	if bundle == "" {
		return nil, errors.New("no bundle")
	}
	path, err := bundleCgroupPath(bundle)
	if err != nil {
		return nil, err
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	dir, v2, ok := cgroupDir(mounts, "memory", path)
	if !ok {
		return nil, fmt.Errorf("cgroup %s has no memory controller", path)
	}
	mem := int64(r.configMemoryLimit(ctx, id))
	tasks := gvisorTasks(r.configPids(bundle), mem)
	if v2 {
		c := newOOMCount(dir)
		r.oom.counts.Store(id, c)
		return func() error {
			defer r.oom.counts.CompareAndDelete(id, c)
			return r.watchOOMv2(ctx, id, dir, c, mem)
		}, nil
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ev := os.NewFile(uintptr(efd), "oom-eventfd") // pollable: Read parks the goroutine, not a thread
	ctl, err := os.Open(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		ev.Close()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.event_control"), []byte(fmt.Sprintf("%d %d", efd, ctl.Fd())), 0); err != nil {
		ev.Close()
		ctl.Close()
		return nil, fmt.Errorf("cgroup.event_control: %w", err)
	}
	last := oomControl(dir, "oom_kill")
	return func() error {
		defer ev.Close()
		defer ctl.Close()
		if r.gvisor && mem > 0 {
			// The guard's ladder wakes the loop too (guardRung). Without it
			// the guard still polls, slowly, and is poked at a stall. Each
			// rung the kernel takes costs it an RCU grace period: the ladder
			// of a 512 MB sandbox took 180-300 ms, which Run spent before it
			// returned until the ladder moved here, onto the watch's own
			// goroutine. The loop's first pass looks at the usage reached
			// meanwhile (pokeOnGrowth), so no growth before it is missed.
			err := registerGuardLadder(ctx, dir, efd, mem, gvisorHostMemory(mem, tasks)+gvisorStallRoom(mem))
			if err != nil && ctx.Err() == nil {
				r.logger.Warn("memory guard's ladder: the guard inside is poked only at a stall", "container", id, "err", err)
			}
		}
		return r.watchOOMv1(ctx, id, dir, ev, last, mem, tasks)
	}, nil
}

// watchOOMv1 is the v1 watch loop: ev is the eventfd registered on dir's
// memory.oom_control, last the kill count already seen.
func (r *Runtime) watchOOMv1(ctx context.Context, id, dir string, ev *os.File, last int, mem int64, tasks int64) error {
	stop := context.AfterFunc(ctx, func() { ev.Close() })
	defer stop()
	st := stall{base: gvisorHostMemory(mem, tasks), ceiling: gvisorHostMemory(mem, tasks) + gvisorStallRoom(mem)}
	st.limit = st.base
	poked := -1 // the guard's rung at the last poke
	// The kernel signals an OOM before its killer has run, so after a
	// wake the kill counter is looked at again for a while (oomSettle).
	var settle time.Time
	for {
		if r.gvisor && mem > 0 {
			poked = r.pokeOnGrowth(id, memUsage(dir), mem, poked)
			r.relieve(ctx, id, dir, &st)
		}
		if n := oomControl(dir, "oom_kill"); n > last {
			r.reportKills(id, n-last)
			last = n
		}
		// While the limit is raised, look again soon to lower it back; and
		// soon after a wake, for the kill that follows it.
		var deadline time.Time
		if st.limit > st.base || time.Now().Before(settle) {
			deadline = time.Now().Add(oomRecheck)
		}
		ev.SetReadDeadline(deadline)
		var b [8]byte
		_, err := ev.Read(b[:])
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return ctx.Err()
		}
		if err == nil {
			settle = time.Now().Add(oomSettle)
		}
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil // the cgroup was removed (its removal signals too)
		}
	}
}

// stall is a gVisor sandbox's host memory limit as its OOM watcher moves
// it: base (gvisorHostMemory) normally, raised up to ceiling while a stall
// is relieved.
type stall struct{ base, ceiling, limit int64 }

// oomRecheck is how often a raised limit is checked for lowering, and the
// kill counter after an OOM signal, for oomSettle.
const (
	oomRecheck = 200 * time.Millisecond
	oomSettle  = 3 * time.Second
)

// relieve handles a gVisor sandbox stalled at its host limit (the kernel's
// OOM killer is off for it, see setSentryMemory). The guard inside has
// killed, or is about to kill, the process whose allocation stalled it,
// and that process dies only when the system call that asked for the
// memory returns: so after oomStepWait, the limit rises a step at a time,
// up to the stall room above the sandbox's host size, while the sandbox
// stays stalled. Past that room (no guard, or a call larger than the room)
// the sandbox is ended as a whole (endStalled). Once the
// sandbox's usage is back under its host size, the limit returns there
// and the killer is off again. The watcher does not pick a guest process
// to kill itself: while the sandbox is stalled its Sentry answers no
// control call (runsc debug --ps, runsc kill --pid wait until the limit
// rises), and the process list it gives afterwards does not say which
// process asked (docs/ARCHITECTURE.md, "Where gvisor differs").
func (r *Runtime) relieve(ctx context.Context, id, dir string, st *stall) {
	if oomControl(dir, "under_oom") == 1 {
		r.pokeGuard(id)
		select {
		case <-time.After(oomStepWait):
		case <-ctx.Done():
			return
		}
		for oomControl(dir, "under_oom") == 1 && ctx.Err() == nil {
			if st.limit >= st.ceiling {
				r.logger.Warn("gvisor sandbox stalled at its memory limit past the stall room; ending it", "container", id, "limit_bytes", st.limit)
				r.endStalled(id, dir)
				return
			}
			next := min(st.limit+oomStep, st.ceiling)
			if err := setMemoryLimit(dir, false, next); err != nil {
				r.logger.Warn("raise a stalled gvisor sandbox's memory limit; ending it", "container", id, "err", err)
				r.endStalled(id, dir)
				return
			}
			st.limit = next
			r.logger.Debug("raised a stalled gvisor sandbox's memory limit", "container", id, "limit_bytes", next)
			time.Sleep(oomStepPace)
		}
		return
	}
	if st.limit > st.base && memUsage(dir)+oomStep <= st.base {
		if err := setMemoryLimit(dir, false, st.base); err == nil {
			st.limit = st.base
			writeCgroup(dir, "memory.oom_control", "1")
		}
	}
}

// endStalled ends a gVisor sandbox that a stall could not relieve: every
// process of its cgroup is killed (SIGKILL), and the kill is reported as
// one of the whole sandbox. It is not left to the kernel's OOM killer:
// that picks the process charged the most, which is one of the Sentry's
// systrap stubs (they map the guest's memory), and a sandbox that lost a
// stub neither runs nor exits. The control plane then boots the sandbox
// again from its disk.
func (r *Runtime) endStalled(id, dir string) {
	r.unwatchExit(id) // reported as the OOMKill below
	writeCgroup(dir, "memory.oom_control", "0")
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
	r.oom.report(OOMKill{ID: id, Count: 1, Sandbox: true, At: time.Now().UTC()})
}

// reportKills reports n kills the kernel counted in id's cgroup: for a
// gVisor sandbox, whose whole cgroup is the Sentry, each is the sandbox's.
func (r *Runtime) reportKills(id string, n int) {
	r.oom.report(OOMKill{ID: id, Count: n, Sandbox: r.gvisor, At: time.Now().UTC()})
}

// memUsage reads a v1 memory cgroup's usage in bytes (0 when unreadable).
func memUsage(dir string) int64 { return memUsageFile(dir, "memory.usage_in_bytes") }

// memUsageFile reads a memory cgroup's usage file in bytes (0 when
// unreadable): memory.usage_in_bytes on v1, memory.current on v2.
func memUsageFile(dir, file string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// watchOOMv2 reports oom_kill increments of a v2 cgroup's memory.events
// and, for a gVisor sandbox of mem bytes, pokes its guard as its
// memory.current climbs the guard's ladder (v2 has no usage thresholds, so
// this is read at the same pace).
func (r *Runtime) watchOOMv2(ctx context.Context, id, dir string, kills *oomCount, mem int64) error {
	t := time.NewTicker(oomV2Poll)
	defer t.Stop()
	poked := -1
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if n := kills.claim(); n > 0 {
			r.reportKills(id, n)
		}
		if r.gvisor && mem > 0 {
			poked = r.pokeOnGrowth(id, memUsageFile(dir, "memory.current"), mem, poked)
		}
	}
}

// oomCount is a cgroup v2 memory.events' oom_kill count as last reported.
// A container's OOM watch and its exit watch share it, so that each kill
// is reported once, by whichever sees it first: on v2 the kernel itself
// ends a gVisor sandbox past memory.max (setSentryMemory), its exit watch
// sees that at once, and the OOM watch reads the count every oomV2Poll.
type oomCount struct {
	mu   sync.Mutex
	path string
	last int
}

func newOOMCount(dir string) *oomCount {
	path := filepath.Join(dir, "memory.events")
	return &oomCount{path: path, last: eventsField(path, "oom_kill")}
}

// claim returns the kills counted since the last claim.
func (c *oomCount) claim() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := eventsField(c.path, "oom_kill")
	if n <= c.last {
		return 0
	}
	d := n - c.last
	c.last = n
	return d
}

// endedForMemory reports, as an OOMKill, the kills id's cgroup v2 counted
// that its OOM watch has not reported yet, as its container ends, so the
// kill that ended it comes first. It returns true when that report stands
// for the end: a gVisor sandbox the kernel killed for memory, whose end
// is then said as the memory end it is (see Exit), not as a plain exit.
func (r *Runtime) endedForMemory(id string) bool {
	v, ok := r.oom.counts.Load(id)
	if !ok {
		return false
	}
	n := v.(*oomCount).claim()
	if n == 0 {
		return false
	}
	r.reportKills(id, n)
	return r.gvisor
}

// The guard's ladder. pt-agent's memory guard inside a gVisor sandbox
// (internal/agent/memguard.go, PT_MEMORY_GUARD=poked) polls the guest's
// memory fast only while it is more than half used; below that it looks
// only every 30 s, because each look costs the Sentry real work, and relies
// on the host to poke it (SIGWINCH to the sandbox's PID 1, which is
// pt-agent) when the sandbox's memory grows: once its host cgroup's usage
// passes half the sandbox's size (the host's usage is at least the guest's,
// so this comes no later than the guest's own half), and again at every
// guardStep above that, so that growth into memory the Sentry kept from
// before, which the guest counts but the host saw already, is still looked
// at a step later. The OOM watcher also pokes at a stall (relieve). On
// cgroup v1 the kernel signals each rung's crossing (memory.usage_in_bytes
// thresholds on the watch's eventfd); on v2 memory.current is read every
// oomV2Poll.

// guardStep is the distance between two rungs of a sandbox of mem bytes.
func guardStep(mem int64) int64 { return max(mem/8, 8<<20) }

// guardRung is the rung usage stands on: -1 below half of mem, then 0, 1,
// … every guardStep.
func guardRung(usage, mem int64) int {
	if usage < mem/2 {
		return -1
	}
	return int((usage - mem/2) / guardStep(mem))
}

// registerGuardLadder asks the kernel to signal efd whenever dir's usage
// crosses a rung, up to ceiling (the stall room's top). It stops early
// when ctx ends (the watch was stopped).
func registerGuardLadder(ctx context.Context, dir string, efd int, mem, ceiling int64) error {
	usage, err := os.Open(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return err
	}
	defer usage.Close()
	for at := mem / 2; at <= ceiling && ctx.Err() == nil; at += guardStep(mem) {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.event_control"), []byte(fmt.Sprintf("%d %d %d", efd, usage.Fd(), at)), 0); err != nil {
			return fmt.Errorf("cgroup.event_control threshold: %w", err)
		}
	}
	return nil
}

// pokeOnGrowth pokes id's guard when usage stands on a higher rung than at
// the last poke and returns the rung now (a fall lowers it, so climbing
// again pokes again).
func (r *Runtime) pokeOnGrowth(id string, usage, mem int64, poked int) int {
	rung := guardRung(usage, mem)
	if rung > poked {
		r.pokeGuard(id)
	}
	return rung
}

// pokeGuard sends SIGWINCH to the sandbox's PID 1, in the background (a
// `runsc kill`). SIGWINCH's default action is to be ignored, so a poke to
// an init that is not pt-agent, or to an older pt-agent restored from an
// image, changes nothing.
func (r *Runtime) pokeGuard(id string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), pokeTimeout)
		defer cancel()
		if err := r.Kill(ctx, id, unix.SIGWINCH); err != nil {
			r.logger.Debug("poke the memory guard", "container", id, "err", err)
		}
	}()
}

// pokeTimeout bounds one poke.
const pokeTimeout = 10 * time.Second

// oomControl reads one field of a v1 cgroup's memory.oom_control (-1 when
// unreadable).
func oomControl(dir, field string) int {
	return eventsField(filepath.Join(dir, "memory.oom_control"), field)
}

// eventsField reads "field value" from a cgroup key-value file.
func eventsField(path, field string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+" "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}
