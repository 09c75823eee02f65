package sessions

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/syncs"
)

// Demand-sized pools (docs/sessions.md, "Demand-sized pools"). A pool set
// with auto keeps a ready target computed from its recent claims instead
// of a fixed min_ready:
//
//	target = clamp(peak, min_ready, max)
//
// where peak is the most claims that arrived within any one refill time
// during the last demand window, and the refill time is the mean of the
// pool's last few boots (create to claimable), never under the pool
// loop's tick. A refill replaces a claimed sandbox one refill time later,
// so peak is how many ready sandboxes the pool would have needed to serve
// every claim of the window warm; when claims stop, the peak ages out of
// the window and the target falls back to min_ready. A per-host memory
// budget then cuts the targets (cutTargets).

const (
	// defaultDemandWindow is how far back claims count: long enough that
	// demand recurring every few minutes keeps its sandboxes ready, short
	// enough that an idle pool gives its memory back within minutes.
	defaultDemandWindow = 5 * time.Minute
	// defaultRefillTime is a pool's refill time until one of its boots
	// has been measured.
	defaultRefillTime = 10 * time.Second
	// bootSamples is how many recent boots the refill time averages.
	bootSamples = 8
	// maxClaimsKept bounds one pool's remembered claims.
	maxClaimsKept = 4096
)

// poolDemand is this process's record of what sizes auto pools: claims
// (warm, and cold because the pool had none ready) by pool, recent boot
// durations, and the claims whose hand-over is still running (the refill
// waits for them, handOver). It lives in memory: after a restart an auto
// pool starts again from min_ready.
type poolDemand struct {
	// now is the clock (tests move it).
	now func() time.Time

	mu     sync.Mutex
	claims map[poolID][]time.Time
	boots  map[poolID][]time.Duration
	// handing is outside mu: it has its own lock.
	handing syncs.InFlight[poolID]
}

func newPoolDemand() *poolDemand {
	return &poolDemand{now: time.Now, claims: map[poolID][]time.Time{}, boots: map[poolID][]time.Duration{}}
}

// claimed counts one claim of the pool, now.
func (d *poolDemand) claimed(id poolID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := append(d.claims[id], d.now())
	if len(c) > maxClaimsKept {
		c = slices.Delete(c, 0, len(c)-maxClaimsKept)
	}
	d.claims[id] = c
}

// booted records how long one of the pool's sandboxes took from its
// create to claimable.
func (d *poolDemand) booted(id poolID, took time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := append(d.boots[id], took)
	if len(b) > bootSamples {
		b = slices.Delete(b, 0, len(b)-bootSamples)
	}
	d.boots[id] = b
}

// handOver marks a claim of the pool whose hand-over is running; done
// (safe to call more than once) ends it.
func (d *poolDemand) handOver(id poolID) (done func()) { return d.handing.Start(id) }

// handingOver is how many of the pool's claims are still being handed
// over by this process.
func (d *poolDemand) handingOver(id poolID) int { return d.handing.Count(id) }

// forget drops every pool's claims before since (those of fixed pools
// and of templates without one too, which nothing else reads).
func (d *poolDemand) forget(since time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, c := range d.claims {
		i, _ := slices.BinarySearchFunc(c, since, func(t, s time.Time) int { return t.Compare(s) })
		if i == len(c) {
			delete(d.claims, id)
		} else if i > 0 {
			d.claims[id] = slices.Clone(c[i:])
		}
	}
}

// figures returns the pool's claims (since forget's cut, oldest first)
// and its refill time, never under floor.
func (d *poolDemand) figures(id poolID, floor time.Duration) ([]time.Time, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.claims[id]
	refill := defaultRefillTime
	if b := d.boots[id]; len(b) > 0 {
		var sum time.Duration
		for _, x := range b {
			sum += x
		}
		refill = sum / time.Duration(len(b))
	}
	return slices.Clone(c), max(refill, floor)
}

// peakClaims is the most of claims (sorted) within any span-long
// interval.
func peakClaims(claims []time.Time, span time.Duration) int {
	peak, i := 0, 0
	for j := range claims {
		for claims[j].Sub(claims[i]) >= span {
			i++
		}
		peak = max(peak, j-i+1)
	}
	return peak
}

// poolTarget is a pool's ready target and what it was computed from.
type poolTarget struct {
	// Target is how many live (ready or provisioning) sandboxes the
	// refill keeps.
	Target int
	// Demand is the claims counted in the demand window (auto pools).
	Demand int
	// Refill is the refill time the target was computed with (auto
	// pools).
	Refill time.Duration
	// Cut is true when the memory budget lowered Target.
	Cut bool
}

// poolTargets computes every pool's target: min_ready (never past max)
// for a fixed pool, clamp(peak, min_ready, max) for an auto one, then
// cut to the memory budget.
func (s *Service) poolTargets(settings map[poolID]PoolStatus, pooled map[poolID][]sandbox.Sandbox) map[poolID]poolTarget {
	d := s.pools.demand
	d.forget(d.now().Add(-cmp.Or(s.cfg.PoolDemandWindow, defaultDemandWindow)))
	floor := max(s.cfg.PoolInterval, time.Second)
	out := make(map[poolID]poolTarget, len(settings))
	floors := make(map[poolID]int, len(settings))
	ram := make(map[poolID]int, len(settings))
	for id, ps := range settings {
		floors[id] = max(min(ps.MinReady, ps.Max), 0)
		t := poolTarget{Target: floors[id]}
		if ps.Auto {
			claims, refill := d.figures(id, floor)
			t.Demand, t.Refill = len(claims), refill
			t.Target = max(min(peakClaims(claims, refill), ps.Max), floors[id])
		}
		out[id] = t
		ram[id] = memberRAM(pooled[id])
	}
	cutTargets(out, floors, ram, s.cfg.PoolBudgetMB)
	return out
}

// cutTargets lowers targets, one sandbox at a time, until their memory
// (target × member RAM, summed) fits budgetMB (0: no budget). Each step
// takes from the pool holding the most memory, demand-driven sandboxes
// (those above a pool's min_ready) before any pool's min_ready, so the
// budget is shared out rather than taken by whichever pool grew first,
// and what an operator asked for explicitly goes last.
func cutTargets(targets map[poolID]poolTarget, floors, ram map[poolID]int, budgetMB int) {
	if budgetMB <= 0 {
		return
	}
	total := 0
	for id, t := range targets {
		total += t.Target * ram[id]
	}
	ids := sortedPools(targets)
	for total > budgetMB {
		pick, found := poolID{}, false
		for _, extrasOnly := range []bool{true, false} {
			best := -1
			for _, id := range ids {
				t := targets[id]
				if t.Target == 0 || (extrasOnly && t.Target <= floors[id]) {
					continue
				}
				if fp := t.Target * ram[id]; fp > best {
					pick, best, found = id, fp, true
				}
			}
			if found {
				break
			}
		}
		if !found {
			return
		}
		t := targets[pick]
		t.Target--
		t.Cut = true
		targets[pick] = t
		total -= ram[pick]
	}
}

// memberRAM is the memory one of the pool's sandboxes holds: a member's
// ram_mb, or the default size a pool boots at when it has none.
func memberRAM(members []sandbox.Sandbox) int {
	for _, sb := range members {
		if sb.RAMMB > 0 {
			return sb.RAMMB
		}
	}
	return sandbox.DefaultRAM
}

// memberPool is the pool a pooled sandbox belongs to (store.MetaPool).
func memberPool(sb sandbox.Sandbox) poolID {
	id := poolID{template: sb.Template}
	if _, class, ok := strings.Cut(sb.Metadata[store.MetaPool], "@"); ok {
		id.runtime = class
	}
	return id
}

// PoolBudgetMB is the memory this host's pools' targets may hold (0: no
// cap; Config.PoolBudgetMB), for GET /v1/hosts.
func (s *Service) PoolBudgetMB() int { return s.cfg.PoolBudgetMB }

// WarmDemand counts a create that the pool of template and runtime class
// ("" the default) could serve — handed one of its sandboxes (warm) or
// booted cold because it had none ready — as that pool's demand, and
// refills now: the core calls it once the create's claim has answered
// (controlplane.SetWarmDemand), so the refill's boot does not compete
// with the hand-over.
func (s *Service) WarmDemand(ctx context.Context, template, runtime string, warm bool) {
	s.pools.demand.claimed(poolID{template, runtime})
	s.kickPool()
}

// sessionHandOver marks a session's claim from its template's
// default-class pool as being handed over until done (idempotent), which
// refills the pool: a refill's boot does not compete with the claim's
// hand-over (docs/sessions.md, "Demand-sized pools").
func (s *Service) sessionHandOver(template string) (done func()) {
	end := s.pools.demand.handOver(poolID{template: template})
	return func() { end(); s.kickPool() }
}

// countSessionClaim counts a session's claim as its pool's demand when it
// was one: claimed (err nil) or none ready (not found); a refused claim
// (quota) is not.
func (s *Service) countSessionClaim(template string, err error) {
	if err == nil || store.IsNotFound(err) {
		s.pools.demand.claimed(poolID{template: template})
	}
}
