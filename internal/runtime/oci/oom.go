package oci

import (
	"context"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/syncs"
)

// OOMKill is a kill by the host kernel's OOM killer in a container's
// memory cgroup. In a runc container that is one of the sandbox's
// processes; in a gVisor sandbox it is the Sentry, which ends every
// process of the sandbox (Sandbox true).
type OOMKill struct {
	ID      string
	Count   int // kills since the previous report
	Sandbox bool
	At      time.Time
}

// oomWatches runs one OOM watcher per running container of a Runtime
// (oom_linux.go): it reports kernel OOM kills to the sink and, for gVisor,
// relieves a stalled sandbox (see setSentryMemory).
type oomWatches struct {
	running syncs.Cancels
	mu      sync.Mutex // guards sink
	sink    func(OOMKill)
}

// OnOOM makes the Runtime report its containers' kernel OOM kills to fn.
// Call it before any container starts; fn must not block for long.
func (r *Runtime) OnOOM(fn func(OOMKill)) {
	r.oom.mu.Lock()
	defer r.oom.mu.Unlock()
	r.oom.sink = fn
}

func (w *oomWatches) report(k OOMKill) {
	w.mu.Lock()
	sink := w.sink
	w.mu.Unlock()
	if sink != nil {
		sink(k)
	}
}

// WatchOOM starts watching a running container's memory cgroup, unless it
// is watched already. Run and Restore start it themselves; a host that
// finds containers running which another process started (ptd after a
// restart) calls it for them. The watch ends when the container's cgroup
// goes away.
func (r *Runtime) WatchOOM(id string) {
	ctx, ended, ok := r.oom.running.Start(context.Background(), id)
	if !ok {
		return
	}
	done := func(err error) {
		ended()
		if err != nil {
			r.logger.Debug("oom watch ended", "container", id, "err", err)
		}
	}
	loop, err := r.watchOOM(ctx, id)
	if err != nil {
		done(err)
		return
	}
	go func() { done(loop()) }()
}

// stopOOMWatch ends id's watch, if any (Delete calls it).
func (r *Runtime) stopOOMWatch(id string) {
	r.oom.running.Stop(id)
}
