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
	// maxClaimsKept bounds the claims of one pool a pass reads.
	maxClaimsKept = 4096
	// pruneEvery is how often the refilling ptd deletes the claims past
	// the demand window from the store.
	pruneEvery = time.Minute
	// readOverlap is how far before its last read a pass reads the
	// window's claims again: a claim committed that long after the time
	// it carries (a session's claim carries its session's creation,
	// before the quota lock) is still seen by the next pass.
	readOverlap = 30 * time.Second
	// fullReadEvery is how often a pass reads the whole window again,
	// so a claim committed later still (or from a host whose clock is
	// behind) counts within a minute.
	fullReadEvery = time.Minute
	// poolClaimPrefix starts the ID of a create's claim (a session's
	// claim has its session's ID).
	poolClaimPrefix = "pcl_"
)

// poolDemand is the pools' demand as the store holds it
// (store.PoolDemandStore): claims (warm, and cold because the pool had
// none ready) with those whose hand-over still runs, and recent boots.
// Every ptd sharing the store writes its claims and boots there and
// reads all of them, so the ptd that refills sizes a pool from claims
// made through every ptd, and a restart keeps them.
type poolDemand struct {
	// now is the clock (tests move it).
	now func() time.Time

	mu sync.Mutex
	// pruned is when this process last pruned the store's claims.
	pruned time.Time

	// read serializes the reads of the window's claims and guards what
	// they keep: seen, the auto pools' claims of the window by claim ID,
	// read for the templates seenFor names, last read at readAt and
	// in full at fullAt. A pass reads only the claims since its last
	// read (less readOverlap) and the whole window every fullReadEvery,
	// so reading the demand costs the claims since the last pass, not
	// those of the whole window.
	read    sync.Mutex
	seen    map[string]seenClaim
	seenFor string
	readAt  time.Time
	fullAt  time.Time
}

// seenClaim is one claim readDemand keeps.
type seenClaim struct {
	pool poolID
	at   time.Time
}

func newPoolDemand() *poolDemand { return &poolDemand{now: time.Now} }

// demandFigures is what one pass read of the pools' demand.
type demandFigures struct {
	// claims are each pool's claim times within the demand window,
	// oldest first.
	claims map[poolID][]time.Time
	// handing counts each pool's claims whose hand-over still runs,
	// made within claimGrace (one a crashed ptd never ended stops
	// counting then).
	handing map[poolID]int
	// refill is each measured pool's refill time: the mean of its
	// recorded boots.
	refill map[poolID]time.Duration
}

// readDemand reads the pools' demand from the store, as cheaply as the
// pass allows: the claims still being handed over (made within
// claimGrace, by the claimed_at index), and — only when a pool of
// settings is auto — those pools' templates' claims in the demand window
// (readWindow: those since the last pass) and the boots (at most
// bootSamples a pool).
func (s *Service) readDemand(ctx context.Context, settings map[poolID]PoolStatus) (demandFigures, error) {
	now := s.pools.demand.now()
	f := demandFigures{claims: map[poolID][]time.Time{}, handing: map[poolID]int{}, refill: map[poolID]time.Duration{}}
	handing, err := s.store.PoolClaims(ctx, store.PoolClaimQuery{Since: now.Add(-claimGrace), HandingOver: true})
	if err != nil {
		return demandFigures{}, err
	}
	for _, c := range handing {
		f.handing[poolID{c.Template, c.Runtime}]++
	}
	var auto []string
	for id, ps := range settings {
		if ps.Auto && !slices.Contains(auto, id.template) {
			auto = append(auto, id.template)
		}
	}
	if len(auto) == 0 {
		return f, nil
	}
	slices.Sort(auto)
	if err := s.readWindow(ctx, now, auto, f.claims); err != nil {
		return demandFigures{}, err
	}
	boots, err := s.store.PoolBoots(ctx)
	if err != nil {
		return demandFigures{}, err
	}
	sums, counts := map[poolID]time.Duration{}, map[poolID]int{}
	for _, b := range boots {
		id := poolID{b.Template, b.Runtime}
		sums[id] += b.Took
		counts[id]++
	}
	for id, sum := range sums {
		f.refill[id] = sum / time.Duration(counts[id])
	}
	return f, nil
}

// readWindow fills claims with the claims of the auto templates' pools
// in the demand window, each pool's oldest first and at most its newest
// maxClaimsKept: what the store has since the last read (less
// readOverlap) merged into what earlier reads kept, or the whole window
// when the templates changed, the clock went back or fullReadEvery
// passed.
func (s *Service) readWindow(ctx context.Context, now time.Time, auto []string, claims map[poolID][]time.Time) error {
	d := s.pools.demand
	d.read.Lock()
	defer d.read.Unlock()
	start := now.Add(-cmp.Or(s.cfg.PoolDemandWindow, defaultDemandWindow))
	key := strings.Join(auto, "\x00")
	since := start
	full := d.seen == nil || key != d.seenFor || now.Before(d.readAt) || now.Sub(d.fullAt) >= fullReadEvery
	if !full && d.readAt.Add(-readOverlap).After(start) {
		since = d.readAt.Add(-readOverlap)
	}
	got, err := s.store.PoolClaims(ctx, store.PoolClaimQuery{Since: since, Templates: auto, PerPool: maxClaimsKept})
	if err != nil {
		return err
	}
	if full {
		d.seen, d.seenFor, d.fullAt = map[string]seenClaim{}, key, now
	}
	d.readAt = now
	for _, c := range got {
		d.seen[c.ID] = seenClaim{poolID{c.Template, c.Runtime}, c.At}
	}
	for id, c := range d.seen {
		if c.at.Before(start) {
			delete(d.seen, id)
		} else {
			claims[c.pool] = append(claims[c.pool], c.at)
		}
	}
	for id, c := range claims {
		slices.SortFunc(c, time.Time.Compare)
		if len(c) > maxClaimsKept {
			claims[id] = c[len(c)-maxClaimsKept:]
		}
	}
	return nil
}

// pruneDemand deletes the claims no pass reads any more, at most every
// pruneEvery: the refilling ptd calls it, so one ptd at a time does.
func (s *Service) pruneDemand(ctx context.Context) {
	d := s.pools.demand
	now := d.now()
	d.mu.Lock()
	due := now.Sub(d.pruned) >= pruneEvery
	if due {
		d.pruned = now
	}
	d.mu.Unlock()
	if !due {
		return
	}
	window := cmp.Or(s.cfg.PoolDemandWindow, defaultDemandWindow)
	if _, err := s.store.PrunePoolClaims(ctx, now.Add(-max(window, claimGrace))); err != nil {
		s.log.WarnContext(ctx, "pools: prune demand", "err", err)
	}
}

// recordClaim records one claim of the pool, now, as its demand.
func (s *Service) recordClaim(ctx context.Context, c store.PoolClaim) {
	c.At = s.pools.demand.now()
	if err := s.store.AddPoolClaim(context.WithoutCancel(ctx), c); err != nil {
		s.log.WarnContext(ctx, "pools: record demand", "pool", store.PoolKey(c.Template, c.Runtime), "err", err)
	}
}

// recordBoot records how long one of the pool's sandboxes took from its
// create to claimable.
func (s *Service) recordBoot(ctx context.Context, id poolID, took time.Duration) {
	b := store.PoolBoot{Template: id.template, Runtime: id.runtime, At: s.pools.demand.now(), Took: took}
	if err := s.store.AddPoolBoot(ctx, b, bootSamples); err != nil {
		s.log.WarnContext(ctx, "pools: record boot", "pool", id.key(), "err", err)
	}
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
func (s *Service) poolTargets(settings map[poolID]PoolStatus, pooled map[poolID][]sandbox.Sandbox, demand demandFigures) map[poolID]poolTarget {
	floor := max(s.cfg.PoolInterval, time.Second)
	out := make(map[poolID]poolTarget, len(settings))
	floors := make(map[poolID]int, len(settings))
	ram := make(map[poolID]int, len(settings))
	for id, ps := range settings {
		floors[id] = max(min(ps.MinReady, ps.Max), 0)
		t := poolTarget{Target: floors[id]}
		if ps.Auto {
			claims := demand.claims[id]
			refill := max(cmp.Or(demand.refill[id], defaultRefillTime), floor)
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
// booted cold because it had none ready — as that pool's demand, in the
// store, and refills now: the core calls it once the create's claim has
// answered (controlplane.SetWarmDemand), so the refill's boot does not
// compete with the hand-over.
func (s *Service) WarmDemand(ctx context.Context, template, runtime string, warm bool) {
	s.recordClaim(ctx, store.PoolClaim{ID: sandbox.NewID(poolClaimPrefix), Template: template, Runtime: runtime, Warm: warm})
	s.kickPool()
}

// sessionHandOver ends the hand-over of session sesID's claim from its
// template's default-class pool (store.ClaimPoolSandbox recorded the
// claim with its hand-over running) once done is called (idempotent),
// which refills the pool: a refill's boot does not compete with the
// claim's hand-over (docs/sessions.md, "Demand-sized pools").
func (s *Service) sessionHandOver(ctx context.Context, sesID string) (done func()) {
	var once sync.Once
	return func() {
		once.Do(func() {
			if err := s.store.EndPoolHandOver(context.WithoutCancel(ctx), sesID); err != nil {
				s.log.WarnContext(ctx, "pools: end hand-over", "session", sesID, "err", err)
			}
			s.kickPool()
		})
	}
}

// sessionColdDemand counts session sesID, recorded cold because its
// template's default-class pool had none ready, as the pool's demand. A
// claimed session the store counted in its claim's transaction; a refused
// one (quota, a context with a live session) is nobody's demand.
func (s *Service) sessionColdDemand(ctx context.Context, sesID, template string) {
	s.recordClaim(ctx, store.PoolClaim{ID: sesID, Template: template})
}
