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
	sink[OOMKill]
	// counts holds, by container, the oom_kill count of its cgroup v2
	// memory.events as last reported (oom_linux.go, oomCount).
	counts sync.Map
}

// OnOOM makes the Runtime report its containers' kernel OOM kills to fn.
// Call it before any container starts; fn must not block for long.
func (r *Runtime) OnOOM(fn func(OOMKill)) { r.oom.set(fn) }

// sink is where a Runtime's watches report, set by its user.
type sink[T any] struct {
	mu sync.Mutex
	fn func(T)
}

func (s *sink[T]) set(fn func(T)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fn = fn
}

func (s *sink[T]) report(v T) {
	s.mu.Lock()
	fn := s.fn
	s.mu.Unlock()
	if fn != nil {
		fn(v)
	}
}

// Watch starts watching a running container's memory cgroup and its
// process's end (exit.go), unless they are watched already. Run and
// Restore start them themselves; a host that finds containers running
// which another process started (ptd after a restart) calls it for them.
// The memory watch ends when the container's cgroup goes away, the exit
// watch when its process ends.
func (r *Runtime) Watch(id string) {
	r.watchExit(id)
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

// unwatch ends id's watches, if any: the container is about to be
// deleted.
func (r *Runtime) unwatch(id string) {
	r.unwatchExit(id)
	r.oom.running.Stop(id)
}
