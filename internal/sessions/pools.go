package sessions

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
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
}

func newPoolState() *poolState {
	return &poolState{kick: make(chan struct{}, 1), preparing: map[string]bool{}}
}

// kickPool asks the pool loop to refill now.
func (s *Service) kickPool() {
	select {
	case s.pools.kick <- struct{}{}:
	default:
	}
}

// PoolStatus is one template's pool: its setting and what it holds.
type PoolStatus struct {
	Template string
	MinReady int
	Max      int
	// Ready sandboxes can be claimed now; Provisioning ones are on
	// their way.
	Ready        int
	Provisioning int
	// Source says where the setting comes from: "default" (ptd flags) or
	// "api" (PUT /v1/pools/{template}).
	Source string
}

// poolSettings merges the flag defaults with the stored settings.
func (s *Service) poolSettings(ctx context.Context) (map[string]PoolStatus, error) {
	out := map[string]PoolStatus{}
	for tpl, sz := range s.cfg.Pools {
		out[tpl] = PoolStatus{Template: tpl, MinReady: sz.MinReady, Max: sz.Max, Source: "default"}
	}
	stored, err := s.store.ListPools(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range stored {
		out[p.Template] = PoolStatus{Template: p.Template, MinReady: p.MinReady, Max: p.Max, Source: "api"}
	}
	return out, nil
}

// PoolServes reports whether template's pool is set to hold sandboxes
// (max > 0), i.e. whether its ready sandboxes may serve creates; a pool
// set to hold none is being drained (controlplane.SetWarmPools).
func (s *Service) PoolServes(ctx context.Context, template string) bool {
	ps, err := s.poolSettings(ctx)
	return err == nil && ps[template].Max > 0
}

// pooled lists the live pooled sandboxes by template.
func (s *Service) pooled(ctx context.Context) (map[string][]sandbox.Sandbox, error) {
	rows, _, err := s.store.ListSandboxes(ctx, store.ListOptions{OrgID: PoolOrgID})
	if err != nil {
		return nil, err
	}
	out := map[string][]sandbox.Sandbox{}
	for _, sb := range rows {
		out[sb.Template] = append(out[sb.Template], sb)
	}
	return out, nil
}

func poolReady(sb sandbox.Sandbox) bool {
	return sb.State == sandbox.StateRunning && sb.Metadata[store.MetaPoolReady] == "1"
}

// Pools lists every template pool with its counts.
func (s *Service) Pools(ctx context.Context, p Principal) ([]PoolStatus, error) {
	settings, err := s.poolSettings(ctx)
	if err != nil {
		return nil, err
	}
	pooled, err := s.pooled(ctx)
	if err != nil {
		return nil, err
	}
	for tpl := range pooled {
		if _, ok := settings[tpl]; !ok {
			settings[tpl] = PoolStatus{Template: tpl, Source: "api"} // draining
		}
	}
	out := make([]PoolStatus, 0, len(settings))
	for _, tpl := range slices.Sorted(maps.Keys(settings)) {
		ps := settings[tpl]
		ps.Ready, ps.Provisioning = countMembers(pooled[tpl])
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

// HostPool is one template's pool members on one host.
type HostPool struct {
	Template            string
	Ready, Provisioning int
}

// HostPools returns each host's pool members by template (sorted), for
// GET /v1/hosts: pool settings are platform-wide, members live on hosts.
func (s *Service) HostPools(ctx context.Context) (map[string][]HostPool, error) {
	pooled, err := s.pooled(ctx)
	if err != nil {
		return nil, err
	}
	byHost := map[string]map[string][]sandbox.Sandbox{}
	for tpl, sbs := range pooled {
		for _, sb := range sbs {
			if byHost[sb.HostID] == nil {
				byHost[sb.HostID] = map[string][]sandbox.Sandbox{}
			}
			byHost[sb.HostID][tpl] = append(byHost[sb.HostID][tpl], sb)
		}
	}
	out := map[string][]HostPool{}
	for host, tpls := range byHost {
		for _, tpl := range slices.Sorted(maps.Keys(tpls)) {
			hp := HostPool{Template: tpl}
			hp.Ready, hp.Provisioning = countMembers(tpls[tpl])
			out[host] = append(out[host], hp)
		}
	}
	return out, nil
}

// SetPool sets a template's warm pool (platform admins only) and refills
// or drains it in the background.
func (s *Service) SetPool(ctx context.Context, p Principal, template string, minReady, max int) (PoolStatus, error) {
	if p.Role != store.RoleAdmin || p.OrgID != tenancy.DefaultOrgID || p.SandboxID != "" {
		return PoolStatus{}, fmt.Errorf("warm pools are platform-wide; setting one needs a platform admin token: %w", sandbox.ErrForbidden)
	}
	if ok, err := s.core.KnownTemplate(ctx, "", template); err != nil || !ok {
		return PoolStatus{}, fmt.Errorf("template %q: %w", template, &sandbox.NotFoundFieldError{Name: "template"})
	}
	if minReady < 0 || minReady > s.cfg.MaxPoolSize {
		return PoolStatus{}, &sandbox.FieldError{Field: "min_ready", Reason: fmt.Sprintf("must be between 0 and %d", s.cfg.MaxPoolSize)}
	}
	if max < minReady || max > s.cfg.MaxPoolSize {
		return PoolStatus{}, &sandbox.FieldError{Field: "max", Reason: fmt.Sprintf("must be between min_ready and %d", s.cfg.MaxPoolSize)}
	}
	if err := s.store.PutPool(ctx, store.Pool{Template: template, MinReady: minReady, Max: max}); err != nil {
		return PoolStatus{}, err
	}
	s.kickPool()
	all, err := s.Pools(ctx, p)
	if err != nil {
		return PoolStatus{}, err
	}
	for _, ps := range all {
		if ps.Template == template {
			return ps, nil
		}
	}
	return PoolStatus{Template: template, MinReady: minReady, Max: max, Source: "api"}, nil
}

// Run resumes sessions left in flight and starts the loop that
// refills warm pools and ends ready sessions whose sandbox is gone.
func (s *Service) Run(ctx context.Context) error {
	if err := s.ensurePoolOrg(ctx); err != nil {
		return err
	}
	if err := s.reconcileSessions(ctx); err != nil {
		return err
	}
	kick := func() <-chan struct{} { return s.pools.kick }
	s.runLoop(ctx, s.cfg.PoolInterval, kick, func(ctx context.Context) {
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
	tpls := slices.Collect(maps.Keys(settings))
	for tpl := range pooled {
		if _, ok := settings[tpl]; !ok {
			tpls = append(tpls, tpl)
		}
	}
	sort.Strings(tpls)
	for _, tpl := range tpls {
		ps := settings[tpl]
		var live, ready []sandbox.Sandbox
		for _, sb := range pooled[tpl] {
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
		// Drain: beyond max, ready ones go first (oldest first).
		for excess := len(live) - ps.Max; excess > 0 && len(ready) > 0; excess-- {
			s.core.DeleteWithReason(ctx, ready[0].ID, "pool_drained")
			ready = ready[1:]
		}
		need := min(ps.MinReady, ps.Max) - len(live)
		if !leader {
			need = 0
		}
		for range max(need, 0) {
			if err := s.addPooled(ctx, tpl); err != nil {
				s.log.WarnContext(ctx, "pool refill", "template", tpl, "err", err)
				break
			}
		}
	}
}

// addPooled creates one pooled sandbox; the pool loop prepares it once it
// runs.
func (s *Service) addPooled(ctx context.Context, tpl string) error {
	zero := 0
	sb, err := s.core.CreatePlatform(ctx, Principal{OrgID: PoolOrgID, Role: store.RoleAdmin}, controlplane.CreateRequest{
		Template: tpl, Type: sandbox.TypeEphemeral, AutoStopMinutes: &zero,
		Metadata: map[string]string{store.MetaPool: tpl},
	})
	if err != nil {
		return err
	}
	crashpoint.Hit("pool.created") // recorded, not yet provisioned nor claimable
	s.log.DebugContext(ctx, "pooled sandbox created", "template", tpl, "sandbox", sb.ID)
	return nil
}

// claimGrace is how long a create's claim of a pooled sandbox may take
// before the pool loop takes it for one a crash left half-done.
const claimGrace = time.Minute

// preparePooled makes a running pooled sandbox claimable once its agent
// answers: it sets pt_pool_ready. Nothing is added to the guest, so a warm
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
	s.goBackground(func(ctx context.Context) {
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
		if _, err := s.core.AgentFor(sb).Stat(pctx, "/"); err != nil {
			s.log.WarnContext(ctx, "prepare pooled sandbox", "sandbox", id, "err", err)
			s.core.DeleteWithReason(ctx, id, "pool_discarded")
			return
		}
		ok, err := s.core.SetPlatformMetadata(ctx, PoolOrgID, id, store.MetaPoolReady, "1", sandbox.StateRunning)
		switch {
		case err != nil:
			s.log.WarnContext(ctx, "mark pooled sandbox ready", "sandbox", id, "err", err)
		case ok:
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
