package tenancy

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// ActiveStates are the states that hold (or are about to hold) compute:
// they count against an org's quotas. Stopped, archived, failed and
// deleted sandboxes do not.
var ActiveStates = []sandbox.State{sandbox.StateCreating, sandbox.StateRestoring, sandbox.StateStarting, sandbox.StateRunning, sandbox.StateStopping}

// OrgLimits are the quotas in force for one org.
type OrgLimits struct {
	MaxSandboxes int
	MaxCPU       float64
	MaxRAMMB     int
	// Overrides are what the org has set; nil fields follow the server.
	Overrides store.OrgQuotas
}

// Limits resolves the org's quotas: its overrides over the server's.
func (s *Service) Limits(ctx context.Context, orgID string) (OrgLimits, error) {
	q, err := s.store.OrgQuotas(ctx, orgID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		// An org without a row (tests, internal callers) has no overrides.
		return OrgLimits{}, err
	}
	l := OrgLimits{MaxSandboxes: s.cfg.OrgMaxSandboxes, MaxCPU: s.cfg.OrgMaxCPU, MaxRAMMB: s.cfg.OrgMaxRAMMB, Overrides: q}
	if q.MaxSandboxes != nil {
		l.MaxSandboxes = *q.MaxSandboxes
	}
	if q.MaxCPU != nil {
		l.MaxCPU = *q.MaxCPU
	}
	if q.MaxRAMMB != nil {
		l.MaxRAMMB = *q.MaxRAMMB
	}
	return l, nil
}

// CheckQuota makes sure one more active sandbox of (cpu, ram) keeps
// the org within its limits. Callers hold LockQuota, so two creates
// cannot both pass on the last slot.
func (s *Service) CheckQuota(ctx context.Context, orgID string, cpu float64, ram int) error {
	l, err := s.Limits(ctx, orgID)
	if err != nil {
		return err
	}
	u, err := s.store.OrgUsage(ctx, orgID, ActiveStates...)
	if err != nil {
		return err
	}
	n, c, r := u.Sandboxes+1, u.CPU+cpu, u.RAMMB+ram
	switch {
	case l.MaxSandboxes > 0 && n > l.MaxSandboxes:
		return &sandbox.QuotaError{Scope: "org", Limit: "sandboxes", Max: float64(l.MaxSandboxes), Wanted: float64(n)}
	case l.MaxCPU > 0 && c > l.MaxCPU+1e-9:
		return &sandbox.QuotaError{Scope: "org", Limit: "cpu", Max: l.MaxCPU, Wanted: c}
	case l.MaxRAMMB > 0 && r > l.MaxRAMMB:
		return &sandbox.QuotaError{Scope: "org", Limit: "ram_mb", Max: float64(l.MaxRAMMB), Wanted: float64(r)}
	}
	return nil
}

// LockQuota serialises quota checks and the writes that follow them for
// one org: on this process (a mutex) and across every process sharing the
// store (store.LockKey "quota/<org>"), so creates through two ptds cannot
// both pass on the org's last slot. ctx bounds the wait.
func (s *Service) LockQuota(ctx context.Context, orgID string) (func(), error) {
	unlock := s.quota.Lock(orgID)
	unlockStore, err := s.store.LockKey(ctx, "quota/"+orgID)
	if err != nil {
		unlock()
		return nil, err
	}
	return func() { unlockStore(); unlock() }, nil
}

// OrgQuotaView is an org's limits and what its active sandboxes use.
type OrgQuotaView struct {
	OrgID  string
	Limits OrgLimits
	Usage  store.Usage
}

// OrgQuota reports an org's limits and usage. An org's tokens may read
// their own org; platform admins any org.
func (s *Service) OrgQuota(ctx context.Context, p Principal, orgID string) (OrgQuotaView, error) {
	if orgID != p.OrgID && !p.PlatformAdmin() {
		return OrgQuotaView{}, fmt.Errorf("org %q: %w", orgID, sandbox.ErrNotFound)
	}
	l, err := s.Limits(ctx, orgID)
	if err != nil {
		return OrgQuotaView{}, err
	}
	u, err := s.store.OrgUsage(ctx, orgID, ActiveStates...)
	if err != nil {
		return OrgQuotaView{}, err
	}
	return OrgQuotaView{OrgID: orgID, Limits: l, Usage: u}, nil
}

// SetOrgQuota replaces an org's quota overrides. Platform admins only
// (an org must not raise its own limits).
func (s *Service) SetOrgQuota(ctx context.Context, p Principal, orgID string, q store.OrgQuotas) (OrgQuotaView, error) {
	if !p.PlatformAdmin() {
		return OrgQuotaView{}, fmt.Errorf("setting org quotas needs a platform admin token (this token is %s): %w", describe(p), sandbox.ErrForbidden)
	}
	if q.MaxSandboxes != nil && (*q.MaxSandboxes < 0 || *q.MaxSandboxes > 1_000_000) {
		return OrgQuotaView{}, &sandbox.FieldError{Field: "max_sandboxes", Reason: "must be between 0 (no limit) and 1000000"}
	}
	if q.MaxCPU != nil && (math.IsNaN(*q.MaxCPU) || *q.MaxCPU < 0 || *q.MaxCPU > 1_000_000) {
		return OrgQuotaView{}, &sandbox.FieldError{Field: "max_cpu", Reason: "must be between 0 (no limit) and 1000000"}
	}
	if q.MaxRAMMB != nil && (*q.MaxRAMMB < 0 || *q.MaxRAMMB > 1<<40) {
		return OrgQuotaView{}, &sandbox.FieldError{Field: "max_ram_mb", Reason: "must be 0 (no limit) or positive"}
	}
	if err := s.store.SetOrgQuotas(ctx, orgID, q); err != nil {
		return OrgQuotaView{}, err
	}
	return s.OrgQuota(ctx, p, orgID)
}
