package agent

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/sigchld"
)

// Reaper collects the exit status of every child of a process running as
// PID 1. Orphans re-parented to init must be reaped or they stay zombies, but
// a blind Wait4(-1) loop would also steal the statuses of the processes the
// agent started itself (exec.Cmd.Wait then fails with ECHILD). So one loop
// reaps everything and hands each status to the waiter registered for that
// pid; registration happens under the same lock as the fork, so a child that
// exits at once is never reaped before its waiter exists.
type Reaper struct {
	mu      sync.Mutex
	waiters map[int]chan unix.WaitStatus
	kick    chan struct{}
}

// NewReaper returns a Reaper; call Run to start reaping.
func NewReaper() *Reaper {
	return &Reaper{waiters: make(map[int]chan unix.WaitStatus), kick: make(chan struct{}, 1)}
}

// reapPoll is the Reaper's safety-net poll. It is slow because every
// wake of an idle sandbox costs its host CPU (a gVisor sandbox's Sentry
// runs the agent's timers), and SIGCHLD alone collects every child.
const reapPoll = 30 * time.Second

// Run reaps children on every SIGCHLD (and every reapPoll as a safety net)
// until ctx is done.
func (r *Reaper) Run(ctx context.Context) {
	sigchld.Loop(ctx, r.kick, reapPoll, r.reap)
}

func (r *Reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if ch, ok := r.waiters[pid]; ok {
			ch <- ws // buffered, never blocks
			delete(r.waiters, pid)
		}
	}
}

// spawner starts processes and reports their exit status exactly once.
type spawner interface {
	// spawn calls start (which forks and returns the child pid) and returns a
	// channel that receives the child's wait status.
	spawn(start func() (int, error)) (int, <-chan unix.WaitStatus, error)
}

func (r *Reaper) spawn(start func() (int, error)) (int, <-chan unix.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := start()
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan unix.WaitStatus, 1)
	r.waiters[pid] = ch
	select { // the child may already be a zombie: reap soon
	case r.kick <- struct{}{}:
	default:
	}
	return pid, ch, nil
}

// directWaiter waits for each child with its own Wait4(pid); used when the
// agent is not PID 1 (tests, development) and must not reap foreign children.
type directWaiter struct{}

func (directWaiter) spawn(start func() (int, error)) (int, <-chan unix.WaitStatus, error) {
	pid, err := start()
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan unix.WaitStatus, 1)
	go func() {
		var ws unix.WaitStatus
		for {
			_, err := unix.Wait4(pid, &ws, 0, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			break
		}
		ch <- ws
	}()
	return pid, ch, nil
}

// statusString renders ws the way os.ProcessState.String does, which is
// what envd reports in EndEvent.status ("exit status 3", "signal: killed").
func statusString(ws unix.WaitStatus) string {
	var res string
	switch {
	case ws.Exited():
		res = "exit status " + strconv.Itoa(ws.ExitStatus())
	case ws.Signaled():
		res = "signal: " + ws.Signal().String()
	case ws.Stopped():
		res = "stop signal: " + ws.StopSignal().String()
		if ws.StopSignal() == unix.SIGTRAP && ws.TrapCause() != 0 {
			res += " (trap " + strconv.Itoa(ws.TrapCause()) + ")"
		}
	case ws.Continued():
		res = "continued"
	}
	if ws.CoreDump() {
		res += " (core dumped)"
	}
	return res
}

// exitCode mirrors os.ProcessState.ExitCode: -1 unless the process exited.
func exitCode(ws unix.WaitStatus) int {
	if !ws.Exited() {
		return -1
	}
	return ws.ExitStatus()
}
