package controlplane

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// activeStates are the states that hold (or are about to hold) compute:
// they count against an org's quotas. Stopped, archived, failed and
// deleted sandboxes do not.
var activeStates = []sandbox.State{sandbox.StateCreating, sandbox.StateRestoring, sandbox.StateStarting, sandbox.StateRunning, sandbox.StateStopping}

// OrgLimits are the quotas in force for one org.
type OrgLimits struct {
	MaxSandboxes int
	MaxCPU       float64
	MaxRAMMB     int
	// Overrides are what the org has set; nil fields follow the server.
	Overrides store.OrgQuotas
}

// orgLimits resolves the org's quotas: its overrides over the server's.
func (s *Service) orgLimits(ctx context.Context, orgID string) (OrgLimits, error) {
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

// checkOrgQuota makes sure one more active sandbox of (cpu, ram) keeps
// the org within its limits. Callers hold lockOrgQuota, so two creates
// cannot both pass on the last slot.
func (s *Service) checkOrgQuota(ctx context.Context, orgID string, cpu float64, ram int) error {
	l, err := s.orgLimits(ctx, orgID)
	if err != nil {
		return err
	}
	u, err := s.store.OrgUsage(ctx, orgID, activeStates...)
	if err != nil {
		return err
	}
	n, c, r := u.Sandboxes+1, u.CPU+cpu, u.RAMMB+ram
	switch {
	case l.MaxSandboxes > 0 && n > l.MaxSandboxes:
		return &QuotaError{Scope: "org", Limit: "sandboxes", Max: float64(l.MaxSandboxes), Wanted: float64(n)}
	case l.MaxCPU > 0 && c > l.MaxCPU+1e-9:
		return &QuotaError{Scope: "org", Limit: "cpu", Max: l.MaxCPU, Wanted: c}
	case l.MaxRAMMB > 0 && r > l.MaxRAMMB:
		return &QuotaError{Scope: "org", Limit: "ram_mb", Max: float64(l.MaxRAMMB), Wanted: float64(r)}
	}
	return nil
}

// lockOrgQuota serialises quota checks and the writes that follow them
// for one org (on this API node).
func (s *Service) lockOrgQuota(orgID string) func() { return s.locks.lock("org-quota/" + orgID) }

// OrgQuotaView is an org's limits and what its active sandboxes use.
type OrgQuotaView struct {
	OrgID  string
	Limits OrgLimits
	Usage  store.Usage
}

// OrgQuota reports an org's limits and usage. An org's tokens may read
// their own org; platform admins any org.
func (s *Service) OrgQuota(ctx context.Context, p Principal, orgID string) (OrgQuotaView, error) {
	if orgID != p.OrgID && !(p.Role == store.RoleAdmin && p.OrgID == DefaultOrgID && p.SandboxID == "" && p.ProjectID == "") {
		return OrgQuotaView{}, fmt.Errorf("org %q: %w", orgID, sandbox.ErrNotFound)
	}
	l, err := s.orgLimits(ctx, orgID)
	if err != nil {
		return OrgQuotaView{}, err
	}
	u, err := s.store.OrgUsage(ctx, orgID, activeStates...)
	if err != nil {
		return OrgQuotaView{}, err
	}
	return OrgQuotaView{OrgID: orgID, Limits: l, Usage: u}, nil
}

// SetOrgQuota replaces an org's quota overrides. Platform admins only
// (an org must not raise its own limits).
func (s *Service) SetOrgQuota(ctx context.Context, p Principal, orgID string, q store.OrgQuotas) (OrgQuotaView, error) {
	if p.Role != store.RoleAdmin || p.OrgID != DefaultOrgID || p.SandboxID != "" || p.ProjectID != "" {
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
