package controlplane

import (
	"context"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// Principal is the authenticated caller of a request (tenancy.Principal):
// every method of the core takes one and answers only within its scope.
// The name is kept here because every transport passes it to the core.
type Principal = tenancy.Principal

// issueSandboxToken creates the token a sandbox's processes use to manage
// their own children, and returns it sealed for the record; "" when
// sandboxes get no API (no sealer or no sandbox API address).
func (s *Service) issueSandboxToken(ctx context.Context, sb sandbox.Sandbox) (string, error) {
	if s.cfg.Sealer == nil || s.cfg.SandboxAPIURL == "" {
		return "", nil
	}
	tok, err := s.tenancy.IssueSandboxToken(ctx, sb.OrgID, sb.ProjectID, sb.ID)
	if err != nil {
		return "", err
	}
	return s.cfg.Sealer.Seal(tok, sb.ID+"/PT_TOKEN"), nil
}

// OrgDeletion is what DeleteOrg did.
type OrgDeletion struct {
	Org       store.Org
	DeletedAt time.Time
	// SandboxesDeleting counts the sandboxes the call moved to deleting.
	SandboxesDeleting int
}

// DeleteOrg deletes an organization (platform admins only): the org and
// its tokens go at once, so nothing acts as it any more; then its webhooks,
// and every live sandbox of it (children included, without the
// live-children refusal of a user's DELETE) with reason org_deleted, a
// platform deletion (see deletedBy), whose teardown runs in the
// background. The platform's own orgs cannot be deleted (ErrConflict).
func (s *Service) DeleteOrg(ctx context.Context, p Principal, id string) (OrgDeletion, error) {
	if !p.PlatformAdmin() {
		return OrgDeletion{}, fmt.Errorf("deleting orgs needs a platform admin token: %w", sandbox.ErrForbidden)
	}
	if id == tenancy.DefaultOrgID || id == PoolOrgID {
		return OrgDeletion{}, fmt.Errorf("org %q is the platform's own: %w", id, sandbox.ErrConflict)
	}
	o, err := s.store.GetOrg(ctx, id)
	if err != nil {
		return OrgDeletion{}, err
	}
	if err := s.store.DeleteOrg(ctx, id); err != nil {
		return OrgDeletion{}, err
	}
	out := OrgDeletion{Org: o, DeletedAt: s.now()}
	// From here the org is gone: the rest is cleanup, which a retry (or the
	// next start) cannot repeat through this call, so it goes on past the
	// caller leaving.
	ctx = context.WithoutCancel(ctx)
	hooks, err := s.store.ListWebhooks(ctx, id)
	if err != nil {
		return out, err
	}
	for _, h := range hooks {
		if err := s.store.DeleteWebhook(ctx, id, h.ID); err != nil && !store.IsNotFound(err) {
			return out, err
		}
	}
	rows, _, err := s.store.ListSandboxes(ctx, store.ListOptions{OrgID: id})
	if err != nil {
		return out, err
	}
	for _, sb := range rows {
		if sb.State == sandbox.StateDeleting || sb.State == sandbox.StateDeleted {
			continue
		}
		if _, err := s.deleteWithReason(ctx, sb.ID, "org_deleted"); err != nil {
			return out, err
		}
		out.SandboxesDeleting++
	}
	s.log.InfoContext(ctx, "org deleted", "org", id, "sandboxes_deleting", out.SandboxesDeleting, "webhooks", len(hooks))
	return out, nil
}
