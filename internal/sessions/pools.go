package sessions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/crashpoint"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// Warm pools keep fresh sandboxes of a template running under PoolOrgID so
// a session can claim one in a single store transaction. A pooled sandbox
// is claimable once its workspace directory exists (metadata
// pt_pool_ready=1); a claimed sandbox never returns to the pool, and a
// session's sandbox is disposed of when the session stops.

// poolState is the in-memory side of the pools: the refill signal and the
// pooled sandboxes being prepared by this process.
type poolState struct {
	kick chan struct{}

	mu        sync.Mutex
	preparing map[string]bool

	// demand sizes auto pools (pooldemand.go).
	demand *poolDemand
}

func newPoolState() *poolState {
	return &poolState{kick: make(chan struct{}, 1), preparing: map[string]bool{}, demand: newPoolDemand()}
}

// kickPool asks the pool loop to refill now.
func (s *Service) kickPool() {
	select {
	case s.pools.kick <- struct{}{}:
	default:
	}
}

// PoolStatus is one pool — a template and a runtime class — its setting
// and what it holds.
type PoolStatus struct {
	Template string
	// Runtime is the class of the pool's sandboxes (never empty: a pool
	// set without one has the default class).
	Runtime  string
	MinReady int
	Max      int
	// Ready sandboxes can be claimed now; Provisioning ones are on
	// their way.
	Ready        int
	Provisioning int
	// Source says where the setting comes from: "default" (ptd flags) or
	// "api" (PUT /v1/pools/{template}).
	Source string
	// Auto pools size themselves from demand; Target is the live
	// sandboxes the refill keeps now (min_ready for a fixed pool, both
	// cut to the host's memory budget), Demand the claims counted in the
	// demand window and RefillTime the refill time the target assumed
	// (docs/sessions.md, "Demand-sized pools").
	Auto       bool
	Target     int
	Demand     int
	RefillTime time.Duration
}

// poolID is a pool's template and its runtime class as the store keys it
// ("" for the default class, Core.PoolRuntime).
type poolID struct{ template, runtime string }

// key is the pool's store.MetaPool value.
func (id poolID) key() string { return store.PoolKey(id.template, id.runtime) }

// poolIDOf parses a ptd --warm-pool key, TEMPLATE[@CLASS].
func (s *Service) poolIDOf(key string) (poolID, error) {
	tpl, class, _ := strings.Cut(key, "@")
	rt, err := s.core.PoolRuntime(class)
	return poolID{tpl, rt}, err
}

// status is the pool's PoolStatus, its class named.
func (s *Service) status(id poolID) PoolStatus {
	rt := id.runtime
	if rt == "" {
		rt = s.core.DefaultRuntime()
	}
	return PoolStatus{Template: id.template, Runtime: rt}
}

// poolSettings merges the flag defaults with the stored settings.
func (s *Service) poolSettings(ctx context.Context) (map[poolID]PoolStatus, error) {
	out := map[poolID]PoolStatus{}
	for key, sz := range s.cfg.Pools {
		id, err := s.poolIDOf(key)
		if err != nil {
			continue // a class this host does not run: Run refused it
		}
		ps := s.status(id)
		ps.MinReady, ps.Max, ps.Auto, ps.Source = sz.MinReady, sz.Max, sz.Auto, "default"
		out[id] = ps
	}
	stored, err := s.store.ListPools(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range stored {
		id := poolID{p.Template, p.Runtime}
		ps := s.status(id)
		ps.MinReady, ps.Max, ps.Auto, ps.Source = p.MinReady, p.Max, p.Auto, "api"
		out[id] = ps
	}
	return out, nil
}

// PoolServes reports whether the pool of template and runtime class (""
// the default) is set to hold sandboxes (max > 0), i.e. whether its ready
// sandboxes may serve creates; a pool set to hold none is being drained
// (controlplane.SetWarmPools).
func (s *Service) PoolServes(ctx context.Context, template, runtime string) bool {
	ps, err := s.poolSettings(ctx)
	return err == nil && ps[poolID{template, runtime}].Max > 0
}

// pooled lists the live pooled sandboxes by pool.
func (s *Service) pooled(ctx context.Context) (map[poolID][]sandbox.Sandbox, error) {
	rows, _, err := s.store.ListSandboxes(ctx, store.ListOptions{OrgID: PoolOrgID})
	if err != nil {
		return nil, err
	}
	out := map[poolID][]sandbox.Sandbox{}
	for _, sb := range rows {
		id := poolID{template: sb.Template}
		if _, class, ok := strings.Cut(sb.Metadata[store.MetaPool], "@"); ok {
			id.runtime = class
		}
		out[id] = append(out[id], sb)
	}
	return out, nil
}

// sortedPools orders pool IDs by template, then class.
func sortedPools[V any](m map[poolID]V) []poolID {
	return slices.SortedFunc(maps.Keys(m), func(a, b poolID) int {
		return cmp.Or(cmp.Compare(a.template, b.template), cmp.Compare(a.runtime, b.runtime))
	})
}

func poolReady(sb sandbox.Sandbox) bool {
	return sb.State == sandbox.StateRunning && sb.Metadata[store.MetaPoolReady] == "1"
}

// Pools lists every pool with its counts, by template and then class.
func (s *Service) Pools(ctx context.Context, p Principal) ([]PoolStatus, error) {
	settings, err := s.poolSettings(ctx)
	if err != nil {
		return nil, err
	}
	pooled, err := s.pooled(ctx)
	if err != nil {
		return nil, err
	}
	for id := range pooled {
		if _, ok := settings[id]; !ok {
			ps := s.status(id)
			ps.Source = "api" // draining
			settings[id] = ps
		}
	}
	demand, err := s.readDemand(ctx, settings)
	if err != nil {
		return nil, err
	}
	targets := s.poolTargets(settings, pooled, demand)
	out := make([]PoolStatus, 0, len(settings))
	for _, id := range sortedPools(settings) {
		ps := settings[id]
		ps.Ready, ps.Provisioning = countMembers(pooled[id])
		tg := targets[id]
		ps.Target, ps.Demand, ps.RefillTime = tg.Target, tg.Demand, tg.Refill
		out = append(out, ps)
	}
	return out, nil
}

// countMembers counts pool members ready to be claimed and those on their
// way (being created or started); others (failing, being disposed of)
// are neither.
func countMembers(sbs []sandbox.Sandbox) (ready, provisioning int) {
	for _, sb := range sbs {
		switch {
		case poolReady(sb):
			ready++
		case sb.State == sandbox.StateCreating || sb.State == sandbox.StateRunning || sb.State == sandbox.StateStarting:
			provisioning++
		}
	}
	return ready, provisioning
}

// HostPool is one pool's members on one host.
type HostPool struct {
	Template            string
	Runtime             string
	Ready, Provisioning int
}

// HostPools returns each host's pool members by pool (sorted by template,
// then class), for GET /v1/hosts: pool settings are platform-wide,
// members live on hosts.
func (s *Service) HostPools(ctx context.Context) (map[string][]HostPool, error) {
	pooled, err := s.pooled(ctx)
	if err != nil {
		return nil, err
	}
	byHost := map[string]map[poolID][]sandbox.Sandbox{}
	for id, sbs := range pooled {
		for _, sb := range sbs {
			if byHost[sb.HostID] == nil {
				byHost[sb.HostID] = map[poolID][]sandbox.Sandbox{}
			}
			byHost[sb.HostID][id] = append(byHost[sb.HostID][id], sb)
		}
	}
	out := map[string][]HostPool{}
	for host, pools := range byHost {
		for _, id := range sortedPools(pools) {
			hp := HostPool{Template: id.template, Runtime: s.status(id).Runtime}
			hp.Ready, hp.Provisioning = countMembers(pools[id])
			out[host] = append(out[host], hp)
		}
	}
	return out, nil
}

// SetPool sets the fixed-size warm pool of a template and runtime class
// ("" the default) — platform admins only — and refills or drains it in
// the background.
func (s *Service) SetPool(ctx context.Context, p Principal, template, runtime string, minReady, max int) (PoolStatus, error) {
	return s.SetPoolSize(ctx, p, template, runtime, PoolSize{MinReady: minReady, Max: max})
}

// SetPoolSize is SetPool with the whole setting: an auto pool sizes
// itself from demand between min_ready and max, so it needs max above
// min_ready.
func (s *Service) SetPoolSize(ctx context.Context, p Principal, template, runtime string, size PoolSize) (PoolStatus, error) {
	minReady, max := size.MinReady, size.Max
	if p.Role != store.RoleAdmin || p.OrgID != tenancy.DefaultOrgID || p.SandboxID != "" {
		return PoolStatus{}, fmt.Errorf("warm pools are platform-wide; setting one needs a platform admin token: %w", sandbox.ErrForbidden)
	}
	if ok, err := s.core.KnownTemplate(ctx, "", template); err != nil || !ok {
		return PoolStatus{}, fmt.Errorf("template %q: %w", template, &sandbox.NotFoundFieldError{Name: "template"})
	}
	rt, err := s.core.PoolRuntime(runtime)
	if err != nil {
		return PoolStatus{}, err
	}
	if minReady < 0 || minReady > s.cfg.MaxPoolSize {
		return PoolStatus{}, &sandbox.FieldError{Field: "min_ready", Reason: fmt.Sprintf("must be between 0 and %d", s.cfg.MaxPoolSize)}
	}
	if max < minReady || max > s.cfg.MaxPoolSize {
		return PoolStatus{}, &sandbox.FieldError{Field: "max", Reason: fmt.Sprintf("must be between min_ready and %d", s.cfg.MaxPoolSize)}
	}
	if size.Auto && max == minReady {
		return PoolStatus{}, &sandbox.FieldError{Field: "max", Reason: "an auto pool's target moves between min_ready and max: max must be above min_ready"}
	}
	if err := s.store.PutPool(ctx, store.Pool{Template: template, Runtime: rt, MinReady: minReady, Max: max, Auto: size.Auto}); err != nil {
		return PoolStatus{}, err
	}
	s.kickPool()
	want := s.status(poolID{template, rt})
	all, err := s.Pools(ctx, p)
	if err != nil {
		return PoolStatus{}, err
	}
	for _, ps := range all {
		if ps.Template == want.Template && ps.Runtime == want.Runtime {
			return ps, nil
		}
	}
	want.MinReady, want.Max, want.Auto, want.Source = minReady, max, size.Auto, "api"
	return want, nil
}

// Run resumes sessions left in flight and starts the loop that
// refills warm pools and ends ready sessions whose sandbox is gone.
func (s *Service) Run(ctx context.Context) error {
	for key := range s.cfg.Pools {
		if _, err := s.poolIDOf(key); err != nil {
			return fmt.Errorf("warm pool default %q: %w", key, err)
		}
	}
	if err := s.ensurePoolOrg(ctx); err != nil {
		return err
	}
	if err := s.reconcileSessions(ctx); err != nil {
		return err
	}
	kick := func() <-chan struct{} { return s.pools.kick }
	s.bg.Loop(ctx, s.cfg.PoolInterval, true, kick, func(ctx context.Context) {
		s.refillPools(ctx)
		s.sweepSessions(ctx)
	}, func() {
		// Hand refills over at once rather than at the lease's expiry.
		s.store.ReleaseLease(context.WithoutCancel(ctx), LeasePools, s.holder)
	})
	return nil
}

// ensurePoolOrg creates the org that owns pooled sandboxes.
func (s *Service) ensurePoolOrg(ctx context.Context) error {
	err := s.store.CreateOrg(ctx, store.Org{ID: PoolOrgID, Name: "warm pools", CreatedAt: time.Now().UTC()})
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("pool org: %w", err)
	}
	return nil
}

// LeasePools is the lease of warm-pool refills: pools are platform-wide,
// so of the ptd processes sharing a store one at a time creates pooled
// sandboxes (on its own host).
const LeasePools = "loop/pools"

// refillPools creates pooled sandboxes up to each pool's min_ready (never
// past max), prepares running ones, and drains sandboxes beyond max or of
// templates without a pool. Counts are platform-wide; each ptd disposes of
// and prepares only its own host's pooled sandboxes, and creates only
// while it holds LeasePools.
func (s *Service) refillPools(ctx context.Context) {
	_, leader, err := s.store.AcquireLease(ctx, LeasePools, s.holder, 3*max(s.cfg.PoolInterval, time.Second))
	if err != nil {
		s.log.WarnContext(ctx, "pools: lease", "err", err)
	}
	settings, err := s.poolSettings(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "pools", "err", err)
		return
	}
	pooled, err := s.pooled(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "pools", "err", err)
		return
	}
	// Without the demand an auto pool's target is unknown: the pass
	// waits rather than drain the pool to min_ready.
	demand, err := s.readDemand(ctx, settings)
	if err != nil {
		s.log.WarnContext(ctx, "pools: demand", "err", err)
		return
	}
	if leader {
		s.pruneDemand(ctx)
	}
	all := maps.Clone(settings)
	for id := range pooled {
		if _, ok := all[id]; !ok {
			all[id] = PoolStatus{} // draining: max 0
		}
	}
	targets := s.poolTargets(settings, pooled, demand)
	for _, id := range sortedPools(all) {
		ps := settings[id]
		var live, ready []sandbox.Sandbox
		// handing are claims whose hand-over still runs, made through
		// any ptd: the refill replaces them once it has answered
		// (docs/sessions.md, "Demand-sized pools").
		handing := demand.handing[id]
		for _, sb := range pooled[id] {
			mine := sb.HostID == "" || sb.HostID == s.core.HostID()
			switch sb.State {
			case sandbox.StateFailed, sandbox.StateStopped, sandbox.StateArchived:
				// A pooled sandbox that is not on its way to running is
				// of no use: its host disposes of it and a fresh one is
				// made.
				if mine {
					s.core.DeleteWithReason(ctx, sb.ID, "pool_discarded")
				}
				continue
			case sandbox.StateDeleting:
				continue
			}
			if claim, claimed := sb.Metadata[store.MetaPoolClaim]; claimed {
				// A create is taking it (controlplane/warm.go); one whose
				// claim never finished (its ptd died, or it hung) may have
				// seen the caller's environment: discarded, never reused.
				at, owner, _ := strings.Cut(claim, " ")
				t, err := time.Parse(time.RFC3339, at)
				if mine && (err != nil || owner != s.core.WarmClaimOwner() || time.Since(t) > claimGrace) {
					s.core.DeleteWithReason(ctx, sb.ID, "pool_discarded")
				} else if err == nil && time.Since(t) <= claimGrace {
					handing++
				}
				continue
			}
			live = append(live, sb)
			if poolReady(sb) {
				if mine {
					ready = append(ready, sb)
				}
			} else if sb.State == sandbox.StateRunning && mine {
				s.preparePooled(sb.ID)
			}
		}
		// Drain: beyond max, ready ones go first (oldest first). The
		// refilling ptd also drains an auto pool, or one the memory
		// budget cut, beyond its target, giving the memory back.
		keep, tg := ps.Max, targets[id]
		if leader && (ps.Auto || tg.Cut) {
			keep = min(keep, tg.Target)
		}
		for excess := len(live) - keep; excess > 0 && len(ready) > 0; excess-- {
			s.core.DeleteWithReason(ctx, ready[0].ID, "pool_drained")
			ready = ready[1:]
		}
		need := tg.Target - len(live) - handing
		if !leader {
			need = 0
		}
		for range max(need, 0) {
			if err := s.addPooled(ctx, id); err != nil {
				s.log.WarnContext(ctx, "pool refill", "pool", id.key(), "err", err)
				break
			}
		}
	}
}

// addPooled creates one pooled sandbox of the pool's template and class;
// the pool loop prepares it once it runs.
func (s *Service) addPooled(ctx context.Context, id poolID) error {
	zero := 0
	sb, err := s.core.CreatePlatform(ctx, Principal{OrgID: PoolOrgID, Role: store.RoleAdmin}, controlplane.CreateRequest{
		Template: id.template, Runtime: id.runtime, Type: sandbox.TypeEphemeral, AutoStopMinutes: &zero,
		Metadata: map[string]string{store.MetaPool: id.key()},
	})
	if err != nil {
		return err
	}
	crashpoint.Hit("pool.created") // recorded, not yet provisioned nor claimable
	s.log.DebugContext(ctx, "pooled sandbox created", "pool", id.key(), "sandbox", sb.ID)
	return nil
}

// claimGrace is how long a create's claim of a pooled sandbox may take
// before the pool loop takes it for one a crash left half-done.
const claimGrace = time.Minute

// preparePooled makes a running pooled sandbox claimable once its agent
// answers (and a code-interpreter sandbox's default kernel is up): it sets
// pt_pool_ready. Nothing is added to the guest, so a warm
// create's sandbox is what a cold one would be; a session's workspace
// directory is made when a session claims it. At most one preparation per
// sandbox runs at a time.
func (s *Service) preparePooled(id string) {
	s.pools.mu.Lock()
	if s.pools.preparing[id] {
		s.pools.mu.Unlock()
		return
	}
	s.pools.preparing[id] = true
	s.pools.mu.Unlock()
	s.bg.Go(func(ctx context.Context) {
		defer func() {
			s.pools.mu.Lock()
			delete(s.pools.preparing, id)
			s.pools.mu.Unlock()
		}()
		sb, err := s.store.GetSandbox(ctx, PoolOrgID, id)
		if err != nil || sb.State != sandbox.StateRunning || poolReady(sb) || sb.Metadata[store.MetaPoolClaim] != "" {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, s.cfg.ProvisionTimeout)
		defer cancel()
		agent := s.core.AgentFor(sb)
		if _, err := agent.Stat(pctx, "/"); err != nil {
			s.log.WarnContext(ctx, "prepare pooled sandbox", "sandbox", id, "err", err)
			s.core.DeleteWithReason(ctx, id, "pool_discarded")
			return
		}
		if err := agent.CodeReady(pctx); err != nil {
			s.log.WarnContext(ctx, "prepare pooled sandbox: code interpreter", "sandbox", id, "err", err)
			s.core.DeleteWithReason(ctx, id, "pool_discarded")
			return
		}
		ok, err := s.core.SetPlatformMetadata(ctx, PoolOrgID, id, store.MetaPoolReady, "1", sandbox.StateRunning)
		switch {
		case err != nil:
			s.log.WarnContext(ctx, "mark pooled sandbox ready", "sandbox", id, "err", err)
		case ok:
			s.recordBoot(ctx, memberPool(sb), time.Since(sb.CreatedAt))
			s.log.DebugContext(ctx, "pooled sandbox ready", "sandbox", id, "template", sb.Template)
		}
	})
}

// sweepSessions ends ready sessions whose sandbox is gone, so their
// status (and its event) does not wait for someone to look.
func (s *Service) sweepSessions(ctx context.Context) {
	ready, err := s.store.SessionsInStatuses(ctx, store.SessionReady)
	if err != nil {
		s.log.WarnContext(ctx, "sweep sessions", "err", err)
		return
	}
	for _, ses := range ready {
		s.syncSession(ctx, ses)
	}
}
