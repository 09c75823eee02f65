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

// AgentEndpointByToken returns the agent address (host:port) of the
// running sandbox id, for E2B's envd traffic: those requests carry only
// the sandbox id and its agent token (X-Access-Token), never an API key,
// so the token is the credential. It returns ErrNotFound when no live
// sandbox has that id, ErrUnauthenticated when token is not the sandbox's
// agent token, and a *StateError when the sandbox is not running.
// checkToken false skips the token check: callers use that only for
// requests the agent authenticates by itself (signed /files URLs) or that
// need no credential (/health).
func (s *Service) AgentEndpointByToken(ctx context.Context, id, token string, checkToken bool) (addr string, err error) {
	if !sandbox.ValidID(sandbox.PrefixSandbox, id) {
		return "", fmt.Errorf("sandbox %q: %w", id, sandbox.ErrNotFound)
	}
	sb, err := s.store.GetSandbox(ctx, "", id)
	if err != nil {
		return "", fmt.Errorf("sandbox %q: %w", id, err)
	}
	if !sb.State.Live() {
		return "", fmt.Errorf("sandbox %q: %w", id, sandbox.ErrNotFound)
	}
	if checkToken && (token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(sb.AgentToken)) != 1) {
		return "", fmt.Errorf("sandbox %q: access token: %w", id, sandbox.ErrUnauthenticated)
	}
	if sb.State != sandbox.StateRunning {
		return "", &StateError{State: sb.State}
	}
	s.Touch(id) // envd traffic is activity, like exec and files on /v1
	return fmt.Sprintf("%s:%d", sb.Address, AgentPort), nil
}
