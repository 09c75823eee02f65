package controlplane

import (
	"context"
	"runtime"
	"sync"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// DefaultBootSlots is how many sandboxes boot at once on a host of cores
// cores unless Config.BootSlots says otherwise: two per core, at least
// two. A boot is CPU-bound for most of its time (runsc's sentry and gofer
// start, the agent comes up); 50 boots at once on 2 cores took 84 s to
// answer and some ran out their deadlines, while the same boots two per
// core finish one after another, each within its own deadline.
func DefaultBootSlots(cores int) int { return max(2, 2*cores) }

// bootGate bounds the boots (a create's first start, a start of a stopped
// sandbox, a restore, a restart after host loss) running at once on this
// host, first come first served. A boot's deadline (ProvisionTimeout)
// starts when it holds a slot, so waiting in the queue never uses it up:
// the time a create may take grows with the queue in front of it, and
// each boot still has its whole deadline. Waiters hold nothing.
type bootGate struct {
	slots int

	mu      sync.Mutex
	active  int
	waiters []chan struct{} // closed when handed a slot, in arrival order
}

func newBootGate(slots int) *bootGate {
	if slots <= 0 {
		slots = DefaultBootSlots(runtime.NumCPU())
	}
	return &bootGate{slots: slots}
}

// acquire returns once the caller holds a boot slot, with the function
// that gives it back (call it exactly once), or ctx's error when ctx ends
// first.
func (g *bootGate) acquire(ctx context.Context) (release func(), err error) {
	g.mu.Lock()
	if len(g.waiters) == 0 && g.active < g.slots {
		g.active++
		g.mu.Unlock()
		return g.release, nil
	}
	w := make(chan struct{})
	g.waiters = append(g.waiters, w)
	g.mu.Unlock()
	select {
	case <-w:
		return g.release, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w: // handed a slot as ctx ended: pass it on
		g.handOffLocked()
	default:
		for i, x := range g.waiters {
			if x == w {
				g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
				break
			}
		}
	}
	return nil, ctx.Err()
}

func (g *bootGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.handOffLocked()
}

// handOffLocked gives the slot being released to the first waiter, or
// frees it.
func (g *bootGate) handOffLocked() {
	if len(g.waiters) > 0 {
		w := g.waiters[0]
		g.waiters = g.waiters[1:]
		close(w) // the slot passes on: active stays
		return
	}
	g.active--
}

// stats returns how many boots wait for a slot and how many hold one.
func (g *bootGate) stats() (waiting, active int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiters), g.active
}

// bootSlot waits for a boot slot for sandbox id, for as long as the
// sandbox stays in state while it waits: a create that is deleted (or a
// start that is stopped) meanwhile stops waiting, with ok false. On
// success it returns the boot's context, whose ProvisionTimeout deadline
// starts now, and done, which ends it and gives the slot back.
func (s *Service) bootSlot(ctx context.Context, id string, state sandbox.State) (bctx context.Context, done func(), ok bool) {
	wctx, stop := context.WithCancel(ctx)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		for {
			ch := s.notify.Channel(id) // taken before the read: no change is missed
			if sb, err := s.store.GetSandbox(wctx, "", id); err != nil || sb.State != state {
				stop()
				return
			}
			select {
			case <-ch:
			case <-wctx.Done():
				return
			}
		}
	}()
	release, err := s.boots.acquire(wctx)
	stop()
	<-watching
	if err != nil {
		return nil, nil, false
	}
	bctx, cancel := context.WithTimeout(ctx, s.cfg.ProvisionTimeout)
	return bctx, func() { cancel(); release() }, true
}
