package oci

import (
	"context"

	"github.com/platinum-dev/platinum/internal/syncs"
)

// Exit is a running container that ended without this Runtime ending it:
// its init (runc: pt-agent) or its sandbox process (runsc: the Sentry)
// exited, was killed, or crashed. A container this Runtime deletes,
// checkpoints out of running or ends for memory is not one: those end
// their watch first (the memory end is reported as an OOMKill instead).
// Nor is a gVisor sandbox the kernel killed for memory (cgroup v2): its
// end is reported as that OOMKill too (endedForMemory).
type Exit struct {
	ID string
}

// exitWatches runs one exit watch per running container of a Runtime
// (exit_linux.go).
type exitWatches struct {
	running syncs.Cancels
	sink[Exit]
}

// OnExit makes the Runtime report its containers' own ends to fn. Call it
// before any container starts; fn must not block for long.
func (r *Runtime) OnExit(fn func(Exit)) { r.exits.set(fn) }

// watchExit starts watching a running container's process for its end,
// unless it is watched already or not running.
func (r *Runtime) watchExit(id string) {
	st, ok := r.runningFromFiles(id)
	if !ok {
		return
	}
	ctx, ended, ok := r.exits.running.Start(context.Background(), id)
	if !ok {
		return
	}
	pidfd, err := openPidfd(st.Pid)
	if err != nil {
		ended()
		r.logger.Debug("exit watch not started", "container", id, "err", err)
		return
	}
	// The pid was the container's when read. If the container still runs
	// with it, the pidfd is its process; else it ended in between (and the
	// pidfd may name a later process given the same pid).
	if now, ok := r.runningFromFiles(id); !ok || now.Pid != st.Pid {
		pidfd.Close()
		pidfd = nil
	}
	go func() {
		defer ended()
		if (pidfd == nil || waitPidfd(ctx, pidfd)) && ctx.Err() == nil && !r.endedForMemory(id) {
			r.exits.report(Exit{ID: id})
		}
	}()
}

// unwatchExit ends id's exit watch, if any: this Runtime is about to end
// the container itself.
func (r *Runtime) unwatchExit(id string) {
	r.exits.running.Stop(id)
}
