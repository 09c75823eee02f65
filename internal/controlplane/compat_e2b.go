package controlplane

import (
	"context"
	"crypto/subtle"
	"fmt"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Read-only helpers for the compatibility surfaces (internal/compat/…),
// whose wire protocols authenticate or filter differently from /v1.

// ListLive returns every sandbox of p's org that is not deleted, newest
// first. E2B's list filters by metadata, several states and template at
// once and pages with an opaque cursor; the store's List does not, so the
// E2B transport filters this result itself.
func (s *Service) ListLive(ctx context.Context, p Principal) ([]sandbox.Sandbox, error) {
	rows, _, err := s.store.ListSandboxes(ctx, store.ListOptions{OrgID: p.OrgID})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// AgentSandbox returns the live sandbox id, in any org, for E2B's envd
// traffic: those requests carry only the sandbox id and its agent token
// (X-Access-Token), never an API key, so the token is the credential (and
// the sandbox's org its principal). It returns ErrNotFound when no live
// sandbox has that id and ErrUnauthenticated when token is not the
// sandbox's agent token. checkToken false skips the token check: callers
// use that only for requests the agent authenticates by itself (signed
// /files URLs) or that need no credential (/health). The agent listens on
// the record's Address at AgentPort while the sandbox is running.
func (s *Service) AgentSandbox(ctx context.Context, id, token string, checkToken bool) (sandbox.Sandbox, Principal, error) {
	if !sandbox.ValidID(sandbox.PrefixSandbox, id) {
		return sandbox.Sandbox{}, Principal{}, fmt.Errorf("sandbox %q: %w", id, sandbox.ErrNotFound)
	}
	sb, err := s.store.GetSandbox(ctx, "", id)
	if err != nil {
		return sandbox.Sandbox{}, Principal{}, fmt.Errorf("sandbox %q: %w", id, err)
	}
	if !sb.State.Live() {
		return sandbox.Sandbox{}, Principal{}, fmt.Errorf("sandbox %q: %w", id, sandbox.ErrNotFound)
	}
	if checkToken && (token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(sb.AgentToken)) != 1) {
		return sandbox.Sandbox{}, Principal{}, fmt.Errorf("sandbox %q: access token: %w", id, sandbox.ErrUnauthenticated)
	}
	if sb.State == sandbox.StateRunning {
		s.Touch(id) // envd traffic is activity, like exec and files on /v1
	}
	return sb, Principal{OrgID: sb.OrgID}, nil
}

// TemplateVersionSlug returns the slug of template version versionID and
// whether it is the slug's newest version and ready (E2B callers may pass
// version IDs as template IDs; a create pins the version with
// CreateRequest.TemplateVersionID). It returns ErrNotFound for an unknown
// version.
func (s *Service) TemplateVersionSlug(ctx context.Context, versionID string) (slug string, newest bool, err error) {
	v, err := s.store.GetTemplateVersion(ctx, versionID)
	if err != nil {
		return "", false, fmt.Errorf("template version %q: %w", versionID, err)
	}
	latest, err := s.store.LatestTemplateVersion(ctx, v.Slug)
	if err != nil {
		return "", false, fmt.Errorf("template %q: %w", v.Slug, err)
	}
	return v.Slug, latest.ID == v.ID && v.Status == store.TemplateReady, nil
}
