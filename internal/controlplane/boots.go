package controlplane

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// DefaultBootSlots is how many sandboxes boot at once on a host of cores
// cores unless Config.BootSlots says otherwise: two per core, at least
// two. A boot is CPU-bound for much of its time (runsc's sentry and gofer
// start, the agent comes up); 50 boots at once on 2 cores took 84 s to
// answer and some ran out their deadlines, while the same boots two per
// core finish one after another, each within its own deadline. It is
// where the adaptive bound starts (bootGate).
func DefaultBootSlots(cores int) int { return max(2, 2*cores) }

// DefaultBootSlotsMax is the most boots the adaptive bound lets run at
// once on a host of cores cores: eight per core. A gVisor boot spends
// much of its time waiting (runsc's processes starting one another, the
// agent coming up), so on a quiet host two per core left the cores idle
// between boots: 50 creates at once took 1.55× as long as 50 raw `runsc
// run`s started together (docs/ARCHITECTURE.md, "Boots queue").
func DefaultBootSlotsMax(cores int) int { return max(DefaultBootSlots(cores), 8*cores) }

// bootSlowFraction: a boot that holds its slot for more than this part of
// its deadline (ProvisionTimeout) is slow, and halves the adaptive bound:
// 5 s of the default 2 min, well inside the host's 10 s short wait for an
// agent (and the 30 s a fresh boot's agent gets).
const bootSlowFraction = 24

// bootGate bounds the boots (a create's first start, a start of a stopped
// sandbox, a restore, a restart after host loss) running at once on this
// host, first come first served. A boot's deadline (ProvisionTimeout)
// starts when it holds a slot, so waiting in the queue never uses it up:
// the time a create may take grows with the queue in front of it, and
// each boot still has its whole deadline. Waiters hold nothing.
//
// The bound adapts to how fast boots go, between floor and ceiling (the
// same: a fixed bound). Each queue starts at floor; a boot that ends
// fast (within slowAfter) while others wait for a slot adds a slot, so a
// queue of fast boots doubles its slots with each round of boots (TCP's
// slow start); a slow boot, or one that ran out its deadline, halves the
// bound (not below floor), once for all the boots that were already
// running when it was cut. When no boot runs or waits the bound goes
// back to floor, so a burst on a host that has since become busy starts
// from there again.
type bootGate struct {
	floor, ceiling int
	slowAfter      time.Duration

	mu     sync.Mutex
	limit  int
	active int
	// cuts counts the halvings: a slow boot that got its slot before the
	// last one was part of the congestion it answered.
	cuts    int
	waiters []*bootWaiter // in arrival order
}

// bootWaiter is a boot waiting for a slot: ch is closed when it is handed
// one, during cuts.
type bootWaiter struct {
	ch   chan struct{}
	cuts int
}

// newBootGate returns a gate of slots fixed slots, or, with slots 0, one
// that adapts between DefaultBootSlots and DefaultBootSlotsMax of this
// machine's cores (maxSlots, when above the floor, sets the ceiling).
// A boot held longer than slowAfter is slow.
func newBootGate(slots, maxSlots int, slowAfter time.Duration) *bootGate {
	floor, ceiling := slots, slots
	if slots <= 0 {
		floor, ceiling = DefaultBootSlots(runtime.NumCPU()), DefaultBootSlotsMax(runtime.NumCPU())
	}
	if maxSlots > 0 {
		ceiling = maxSlots
	}
	ceiling = max(ceiling, floor)
	return &bootGate{floor: floor, ceiling: ceiling, slowAfter: slowAfter, limit: floor}
}

// bootTicket is one slot held: release it once with the boot's outcome.
type bootTicket struct {
	g     *bootGate
	since time.Time
	cuts  int // the gate's cuts when the slot was handed over
}

// acquire returns once the caller holds a boot slot, with its ticket, or
// ctx's error when ctx ends first.
func (g *bootGate) acquire(ctx context.Context) (*bootTicket, error) {
	g.mu.Lock()
	if len(g.waiters) == 0 && g.active < g.limit {
		g.active++
		cuts := g.cuts
		g.mu.Unlock()
		return &bootTicket{g: g, since: time.Now(), cuts: cuts}, nil
	}
	w := &bootWaiter{ch: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	g.mu.Unlock()
	select {
	case <-w.ch:
		return &bootTicket{g: g, since: time.Now(), cuts: w.cuts}, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.ch: // handed a slot as ctx ended: pass it on
		g.active--
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

// release gives the slot back. slow says the boot took too long (or ran
// out its deadline), which halves the bound; a fast boot with others
// waiting adds a slot. It returns the bound before and after.
func (t *bootTicket) release(slow bool) (from, to int) {
	g := t.g
	g.mu.Lock()
	defer g.mu.Unlock()
	from = g.limit
	g.active--
	switch {
	case slow && t.cuts == g.cuts:
		// Boots that had their slots before the last cut were counted in
		// it: one congestion, one halving.
		g.limit = max(g.floor, g.limit/2)
		g.cuts++
	case !slow && len(g.waiters) > 0:
		g.limit = min(g.ceiling, g.limit+1)
	}
	g.handOffLocked()
	if g.active == 0 && len(g.waiters) == 0 {
		g.limit = g.floor
	}
	return from, g.limit
}

// handOffLocked hands free slots (under the bound) to the first waiters.
func (g *bootGate) handOffLocked() {
	for len(g.waiters) > 0 && g.active < g.limit {
		w := g.waiters[0]
		g.waiters = g.waiters[1:]
		g.active++
		w.cuts = g.cuts
		close(w.ch)
	}
}

// stats returns how many boots wait for a slot, how many hold one, and
// the bound now.
func (g *bootGate) stats() (waiting, active, limit int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiters), g.active, g.limit
}

// bootSlot waits for a boot slot for sandbox id, for as long as the
// sandbox stays in state while it waits: a create that is deleted (or a
// start that is stopped) meanwhile stops waiting, with ok false. On
// success it returns the boot's context, whose ProvisionTimeout deadline
// starts now, and done, which ends it and gives the slot back, telling
// the gate whether the boot was slow (held the slot past the gate's
// slowAfter, or ran out its deadline).
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
	ticket, err := s.boots.acquire(wctx)
	stop()
	<-watching
	if err != nil {
		return nil, nil, false
	}
	bctx, cancel := context.WithTimeout(ctx, s.cfg.ProvisionTimeout)
	return bctx, func() {
		slow := time.Since(ticket.since) > s.boots.slowAfter || errors.Is(bctx.Err(), context.DeadlineExceeded)
		cancel()
		if from, to := ticket.release(slow); from != to {
			// bench -only-cold-create reports the highest bound a burst reached.
			s.log.DebugContext(ctx, "boot slots", "sandbox", id, "slow", slow, "from", from, "to", to)
		}
	}, true
}
