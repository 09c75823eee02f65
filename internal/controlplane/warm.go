package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/crashpoint"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Warm creates (docs/sessions.md, "Warm creates"): a create whose template
// has a warm pool takes one of the pool's running sandboxes instead of
// booting one, when nothing it asks for needs a boot of its own. The
// sandbox is handed over with the caller's own record — org, project,
// parent, name, env, metadata, retention, TTL — so that nothing the caller
// can observe differs from a cold create but the speed and Start.
//
// A claim goes in three steps so that no two creates ever share a
// sandbox and a half-done claim is never handed out: reserve the pooled
// sandbox (its ready mark swapped for MetaPoolClaim in one row write; a
// second create cannot reserve it), set the caller's environment in the
// guest, then adopt it (store.AdoptSandbox, one transaction). A pooled
// sandbox whose claim fails after the reservation is discarded, never
// returned to the pool: its guest may have seen the caller's environment.
// The pool loop (internal/sessions) discards one a crash left reserved
// (its claim names another process, WarmClaimOwner).

// warmInitTimeout bounds setting the caller's environment in a pooled
// sandbox; past it the sandbox is discarded and the create boots cold.
const warmInitTimeout = 5 * time.Second

// warmCandidates is how many ready pooled sandboxes a create looks at.
const warmCandidates = 8

// warmEligible reports whether want (a create's record, not yet stored)
// may be served from a warm pool: nothing in it needs a boot of its own.
// Secrets, a network policy, SSH keys and GPUs are applied at boot; a
// sandbox made from a snapshot or an org's own template has no pool.
func warmEligible(p Principal, r CreateRequest, fromSnapshot, orgTemplate bool, sshKeys []string) bool {
	return p.OrgID != PoolOrgID && !r.platformMetadata && !fromSnapshot && !orgTemplate &&
		len(r.Secrets) == 0 && r.Network == nil && len(sshKeys) == 0 && r.GPUs == 0
}

// claimWarm hands want a ready pooled sandbox of its template, runtime
// class and size, if there is one. ok is false when there is none (or
// none could be claimed), and the create boots cold; an error is the
// caller's (quota, a taken name), with no sandbox claimed.
func (s *Service) claimWarm(ctx context.Context, want sandbox.Sandbox) (out sandbox.Sandbox, ok bool, err error) {
	if s.warmServes != nil && !s.warmServes(ctx, want.Template) {
		return sandbox.Sandbox{}, false, nil
	}
	cands, _, err := s.store.ListSandboxes(ctx, store.ListOptions{
		OrgID: PoolOrgID, State: sandbox.StateRunning, Limit: warmCandidates,
		Metadata: map[string]string{store.MetaPool: want.Template, store.MetaPoolReady: "1"},
	})
	if err != nil || len(cands) == 0 {
		return sandbox.Sandbox{}, false, nil
	}
	version := want.TemplateVersionID
	if version == "" {
		v, err := s.store.LatestTemplateVersion(ctx, want.Template)
		if err != nil || v.Status != store.TemplateReady {
			return sandbox.Sandbox{}, false, nil
		}
		version = v.ID
	}
	for _, c := range cands {
		if c.HostID != s.host.ID() || c.Runtime != want.Runtime || c.TemplateVersionID != version ||
			c.CPU != want.CPU || c.RAMMB != want.RAMMB || c.DiskGB != want.DiskGB {
			continue
		}
		reserved, err := s.reservePooled(ctx, c.ID)
		if err != nil {
			continue // another create took it, or it is going away
		}
		crashpoint.Hit("warm.reserved") // out of the pool, not yet the caller's
		out, err := s.adoptPooled(ctx, reserved, want)
		if err == nil {
			return out, true, nil
		}
		s.DeleteWithReason(context.WithoutCancel(ctx), reserved.ID, "pool_discarded")
		var fe *sandbox.FieldError
		if errors.Is(err, store.ErrConflict) || errors.Is(err, sandbox.ErrQuotaExceeded) || errors.As(err, &fe) {
			return sandbox.Sandbox{}, false, err
		}
		s.log.WarnContext(ctx, "warm claim failed; the pooled sandbox is discarded", "sandbox", reserved.ID, "err", err)
	}
	return sandbox.Sandbox{}, false, nil
}

// SetWarmPools tells warm creates whether a template's pool serves
// creates: one set to hold nothing is being drained, and a create then
// boots cold rather than take what the drain is about to delete. Unset,
// any ready pooled sandbox may be claimed. Call it before serving.
func (s *Service) SetWarmPools(serves func(ctx context.Context, template string) bool) {
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

// adoptPooled sets want's environment in the reserved sandbox's guest,
// then makes the sandbox want's (under the org's quota lock, as a cold
// create stores its record).
func (s *Service) adoptPooled(ctx context.Context, reserved, want sandbox.Sandbox) (sandbox.Sandbox, error) {
	sb := want
	sb.ID, sb.Version, sb.APIToken = reserved.ID, reserved.Version, reserved.APIToken
	sb.Start = sandbox.StartWarm
	if !s.noAgentInit {
		ictx, cancel := context.WithTimeout(ctx, warmInitTimeout)
		err := s.agent(reserved.ID, reserved.Address, reserved.AgentToken).Init(ictx, s.sandboxEnv(sb))
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
