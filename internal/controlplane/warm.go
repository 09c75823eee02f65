package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/crashpoint"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Warm creates (docs/sessions.md, "Warm creates"): a create whose template
// and runtime class have a warm pool takes one of the pool's running
// sandboxes instead of booting one, when nothing it asks for needs a boot
// of its own. The sandbox is handed over with the caller's own record —
// org, project, parent, name, env, metadata, retention, TTL, secrets,
// network policy, SSH keys, the caller's cpu and ram_mb, a disk grown to
// the caller's disk_gb — so that nothing the caller can observe differs
// from a cold create but the speed and Start.
//
// A claim goes in steps so that no two creates ever share a sandbox and a
// half-done claim is never handed out: reserve the pooled sandbox (its
// ready mark swapped for MetaPoolClaim in one row write; a second create
// cannot reserve it), apply the caller's network policy and secrets on
// the host (before anything of the caller's runs in the guest), resize it
// live to the caller's cpu and ram_mb and grow its disk to the caller's
// disk_gb, set the caller's environment in the guest, then adopt it
// (store.AdoptSandbox, one transaction). A pooled sandbox whose claim
// fails after the reservation is discarded, never returned to the pool:
// its guest may have seen the caller's environment, its host the caller's
// policy and secrets.
// The pool loop (internal/sessions) discards one a crash left reserved
// (its claim names another process, WarmClaimOwner).

// warmInitTimeout bounds setting the caller's environment in a pooled
// sandbox; past it the sandbox is discarded and the create boots cold.
const warmInitTimeout = 5 * time.Second

// warmCandidates is how many ready pooled sandboxes a create looks at.
const warmCandidates = 8

// warmEligible reports whether want (a create's record, not yet stored,
// its secrets sealed and its network policy resolved) may be served from
// a warm pool: nothing in it needs a boot of its own. GPUs are handed to
// the runtime at boot; a sandbox made from a snapshot or an org's own
// template has no pool. SSH keys are not in the guest at all: they live
// only in the record, where the SSH gateway looks them up at each login
// (SSHLogin, docs/terminal.md), so the adopted record carries them as a
// cold create's does. A network policy and secrets are applied to the
// claimed sandbox in place, so they need a host that can do that
// (NetworkSetter); without one they boot cold.
func (s *Service) warmEligible(p Principal, r CreateRequest, want sandbox.Sandbox, fromSnapshot, orgTemplate bool) bool {
	if p.OrgID == PoolOrgID || r.platformMetadata || fromSnapshot || orgTemplate || want.GPUs > 0 {
		return false
	}
	if _, ok := s.host.(NetworkSetter); !ok && needsNetwork(want) {
		return false
	}
	return true
}

// needsNetwork reports whether sb's host must enforce anything on its
// traffic: a policy other than the default, or secrets for the egress
// proxy to swap in (networkSpec is nil otherwise).
func needsNetwork(sb sandbox.Sandbox) bool {
	return !sb.Network.IsDefault() || len(sb.Secrets) > 0
}

// claimWarm hands want a ready pooled sandbox of its template and runtime
// class (the class's own pool, store.PoolKey), a size it can take
// (warmSizeFits) and a disk no bigger than want's (a smaller one is
// grown), if there is one. secrets are the create's own (want's are
// sealed under the ID a cold create would have: a claim seals them again
// under the pooled sandbox's). ok is false when there is none (or none
// could be claimed), and the create boots cold; demand then says the pool
// had none ready, so the cold create, once stored, is the pool's demand
// (noteColdDemand). An error is the caller's (quota, a taken name), with
// no sandbox claimed.
func (s *Service) claimWarm(ctx context.Context, want sandbox.Sandbox, secrets map[string]SecretInput) (out sandbox.Sandbox, ok, demand bool, err error) {
	class, err := s.PoolRuntime(want.Runtime)
	if err != nil {
		return sandbox.Sandbox{}, false, false, nil
	}
	if s.warmServes != nil && !s.warmServes(ctx, want.Template, class) {
		return sandbox.Sandbox{}, false, false, nil
	}
	cands, _, err := s.store.ListSandboxes(ctx, store.ListOptions{
		OrgID: PoolOrgID, State: sandbox.StateRunning, Limit: warmCandidates,
		Metadata: map[string]string{store.MetaPool: store.PoolKey(want.Template, class), store.MetaPoolReady: "1"},
	})
	if err != nil || len(cands) == 0 {
		return sandbox.Sandbox{}, false, err == nil, nil // cold: the pool had none ready
	}
	version := want.TemplateVersionID
	if version == "" {
		v, err := s.store.LatestTemplateVersion(ctx, want.Template)
		if err != nil || v.Status != store.TemplateReady {
			return sandbox.Sandbox{}, false, false, nil
		}
		version = v.ID
	}
	for _, c := range cands {
		if c.HostID != s.host.ID() || c.Runtime != want.Runtime || c.TemplateVersionID != version ||
			!s.warmSizeFits(c, want) || c.DiskGB > want.DiskGB {
			continue
		}
		reserved, err := s.reservePooled(ctx, c.ID)
		if err != nil {
			continue // another create took it, or it is going away
		}
		crashpoint.Hit("warm.reserved") // out of the pool, not yet the caller's
		out, err := s.adoptPooled(ctx, reserved, want, secrets)
		if err == nil {
			s.noteWarmDemand(ctx, want.Template, class, true)
			return out, true, false, nil
		}
		s.DeleteWithReason(context.WithoutCancel(ctx), reserved.ID, "pool_discarded")
		var fe *sandbox.FieldError
		if errors.Is(err, store.ErrConflict) || errors.Is(err, sandbox.ErrQuotaExceeded) || errors.As(err, &fe) {
			return sandbox.Sandbox{}, false, false, err
		}
		s.log.WarnContext(ctx, "warm claim failed; the pooled sandbox is discarded", "sandbox", reserved.ID, "err", err)
	}
	return sandbox.Sandbox{}, false, false, nil
}

// warmSizeFits reports whether the pooled sandbox c can be given want's
// cpu and ram_mb so that its guest sees what a cold boot of want's would:
// the same size, or — where c's runtime class resizes a running sandbox
// live (noLiveResize, docs/resize.md) — a size within c's boot headroom
// and no less memory than it booted with (a live shrink goes no lower,
// resizeLive). Anything else boots cold: a gVisor guest keeps its boot
// size, and a bigger size than the headroom needs a boot of its own.
func (s *Service) warmSizeFits(c, want sandbox.Sandbox) bool {
	if c.CPU == want.CPU && c.RAMMB == want.RAMMB {
		return true
	}
	if s.noLiveResize(c.Runtime) != "" || c.Live == nil {
		return false
	}
	return want.CPU <= c.Live.MaxCPU && want.RAMMB <= c.Live.MaxRAMMB && want.RAMMB >= c.Live.BootRAMMB
}

// SetWarmPools tells warm creates whether the pool of a template and
// runtime class ("" the default, PoolRuntime) serves creates: one set to
// hold nothing is being drained, and a create then boots cold rather than
// take what the drain is about to delete. Unset, any ready pooled sandbox
// may be claimed. Call it before serving.
func (s *Service) SetWarmPools(serves func(ctx context.Context, template, runtime string) bool) {
	s.warmServes = serves
}

// errPoolTaken is reservePooled's refusal: the sandbox is no longer a
// ready member of its pool.
var errPoolTaken = errors.New("pooled sandbox is not claimable")

// reservePooled takes a ready pooled sandbox out of its pool for one
// create: its ready mark becomes MetaPoolClaim (the time), in one row
// write against the latest record.
func (s *Service) reservePooled(ctx context.Context, id string) (sandbox.Sandbox, error) {
	return s.store.ModifySandbox(ctx, PoolOrgID, id, func(sb *sandbox.Sandbox) error {
		if sb.State != sandbox.StateRunning || sb.Metadata[store.MetaPoolReady] != "1" {
			return errPoolTaken
		}
		delete(sb.Metadata, store.MetaPoolReady)
		sb.Metadata[store.MetaPoolClaim] = s.now().Format(time.RFC3339) + " " + s.claimOwner
		return nil
	})
}

// WarmClaimOwner names this process in the claims it makes: the value of
// store.MetaPoolClaim is "<RFC 3339 time> <owner>". A pooled sandbox
// reserved by another owner on this host was left by a ptd that died
// mid-claim.
func (s *Service) WarmClaimOwner() string { return s.claimOwner }

// adoptPooled applies want's settings to the reserved sandbox — its
// network policy and secrets on the host, then its cpu, ram_mb and disk
// size, then its environment in the guest, in that order so that nothing
// the caller's environment starts runs without the policy — and makes the
// sandbox
// want's (under the org's quota lock, as a cold create stores its record).
func (s *Service) adoptPooled(ctx context.Context, reserved, want sandbox.Sandbox, secrets map[string]SecretInput) (sandbox.Sandbox, error) {
	sb := want
	sb.ID, sb.Version, sb.APIToken = reserved.ID, reserved.Version, reserved.APIToken
	sb.Start = sandbox.StartWarm
	var err error
	// A secret is sealed for the one sandbox it belongs to (the ID is
	// part of what is sealed): this one, not the cold create's.
	if sb.Secrets, err = s.sealSecrets(sb.ID, secrets); err != nil {
		return sandbox.Sandbox{}, err
	}
	if needsNetwork(sb) {
		ns, ok := s.host.(NetworkSetter)
		if !ok {
			return sandbox.Sandbox{}, fmt.Errorf("apply the network policy: %w", sandbox.ErrUnavailable)
		}
		// What a cold boot hands the host (startSpec) and a live policy
		// change applies (SetNetwork): the same spec, from the record.
		if err := ns.SetNetwork(ctx, sb.ID, s.networkSpec(sb)); err != nil {
			return sandbox.Sandbox{}, fmt.Errorf("apply the network policy: %w", err)
		}
		crashpoint.Hit("warm.network") // the host has the caller's policy; the record is the pool's
	}
	resize := sb.CPU != reserved.CPU || sb.RAMMB != reserved.RAMMB
	if resize {
		// As a live resize of a running sandbox (resizeLive): the guest
		// sees the new size at once (nproc, /proc/meminfo, its cgroup's
		// limit). claimWarm picked a sandbox whose class can and whose
		// headroom holds it (warmSizeFits).
		// The host's refusal is the platform's, not the caller's: not
		// wrapped, so that a conflict (memory it could not free) boots
		// cold rather than answer the create with it.
		if err := s.host.Resize(ctx, sb.ID, sb.CPU, sb.RAMMB); err != nil {
			return sandbox.Sandbox{}, fmt.Errorf("resize to cpu %g, ram_mb %d: %v", sb.CPU, sb.RAMMB, err)
		}
		crashpoint.Hit("warm.resized") // the host has the caller's size; the record is the pool's
	}
	grow := sb.DiskGB > reserved.DiskGB
	if grow {
		// As a resize of a running sandbox grows it (resizeLive): online,
		// the guest's df sees it at once.
		if err := s.host.GrowDisk(ctx, sb.ID, sb.DiskGB); err != nil {
			return sandbox.Sandbox{}, fmt.Errorf("grow the disk to %d GB: %v", sb.DiskGB, err) // the platform's, as a resize's
		}
	}
	if resize || grow {
		// Adopting keeps the stored size (store.AdoptSandbox): record the
		// caller's on the reserved record first. The live headroom keeps
		// the pooled boot's maxima but takes the caller's memory as its
		// floor, so a later shrink stops where a cold boot's would.
		sized, err := s.store.ModifySandbox(ctx, PoolOrgID, sb.ID, func(r *sandbox.Sandbox) error {
			if r.State != sandbox.StateRunning || r.Metadata[store.MetaPoolClaim] != reserved.Metadata[store.MetaPoolClaim] {
				return errPoolTaken
			}
			r.CPU, r.RAMMB, r.DiskGB = sb.CPU, sb.RAMMB, sb.DiskGB
			if resize && r.Live != nil {
				live := *r.Live
				live.BootRAMMB = sb.RAMMB
				r.Live = &live
			}
			return nil
		})
		if err != nil {
			return sandbox.Sandbox{}, fmt.Errorf("record the caller's size: %w", err)
		}
		sb.Version = sized.Version
	}
	if !s.noAgentInit {
		ictx, cancel := context.WithTimeout(ctx, warmInitTimeout)
		// As at a cold boot: the agent's env and /etc/pt-env (what terminal
		// shells source), not the pool's.
		ag := s.agent(reserved.ID, reserved.Address, reserved.AgentToken)
		err := setGuestEnv(ictx, ag, agentclient.InitRequest{Env: s.sandboxEnv(sb)}, true)
		cancel()
		if err != nil {
			return sandbox.Sandbox{}, fmt.Errorf("set the environment: %w", err)
		}
		crashpoint.Hit("warm.initialized") // the guest has the caller's env; the record is the pool's
	}
	unlock, err := s.tenancy.LockQuota(ctx, want.OrgID)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	defer unlock()
	if err := s.tenancy.CheckQuota(ctx, want.OrgID, want.CPU, want.RAMMB); err != nil {
		return sandbox.Sandbox{}, err
	}
	return s.store.AdoptSandbox(ctx, PoolOrgID, sb)
}
