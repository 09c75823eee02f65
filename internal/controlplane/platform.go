package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/platinum-dev/platinum/internal/agentclient"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// What the core offers the control plane's other parts (internal/sessions:
// sessions, warm pools and workspaces; docs/ARCHITECTURE.md) beyond what a
// transport calls. These act for the platform itself — no caller's
// principal limits them to an org — so transports never call them: each
// does one thing a part needs, rather than the part reaching into the
// core's state.

// PoolOrgID owns pooled sandboxes until a session claims one; the claim
// moves the sandbox (and its sandbox-scoped token) to the session's org.
// Pools are platform-wide: every org draws from the same ready sandboxes,
// each fresh and used by at most one session (docs/sessions.md). The core
// knows it only to refuse deleting the org (DeleteOrg).
const PoolOrgID = "org_pool"

// CreatePlatform is Create for the platform's own sandboxes (pooled and
// session sandboxes): r may set the platform's metadata keys
// (pt_pool, pt_pool_ready, pt_session_id), which callers may not.
func (s *Service) CreatePlatform(ctx context.Context, p Principal, r CreateRequest) (sandbox.Sandbox, error) {
	r.platformMetadata = true
	return s.Create(ctx, p, r)
}

// DeleteWithReason moves a live sandbox of any org to deleting and starts
// its teardown, recording reason as deleted_reason (session_* reasons are
// the user's, pool_* the platform's; see deletedBy). Deleting a sandbox
// already deleting or deleted returns it unchanged.
func (s *Service) DeleteWithReason(ctx context.Context, id, reason string) (sandbox.Sandbox, error) {
	return s.deleteWithReason(ctx, id, reason)
}

// StopWithReason stops a running or failed sandbox of p's org disk-only
// (no memory kept), recording reason; a stopped one is returned unchanged.
func (s *Service) StopWithReason(ctx context.Context, p Principal, id, reason string) (sandbox.Sandbox, error) {
	return s.stop(ctx, p, id, reason, false)
}

// KeepPersistent makes a sandbox of any org persistent, so its disk
// outlives its stop: sessions keep a sandbox whose disk holds the only
// copy of a workspace that could not be saved (session sandboxes are
// ephemeral, deleted when they stop).
func (s *Service) KeepPersistent(ctx context.Context, id string) error {
	for {
		sb, err := s.store.GetSandbox(ctx, "", id)
		if err != nil {
			return err
		}
		if sb.Retention.Type != sandbox.TypeEphemeral {
			return nil
		}
		sb.Retention.Type = sandbox.TypePersistent
		if _, err = s.update(ctx, sb); !isConflict(err) {
			return err
		}
	}
}

// SetPlatformMetadata sets one of the platform's metadata keys on a
// sandbox of org while it is in state want, retrying when it changes
// meanwhile (warm pools mark a prepared sandbox claimable this way). ok is
// false, with nothing written, when the sandbox cannot be read or is in
// another state.
func (s *Service) SetPlatformMetadata(ctx context.Context, org, id, key, value string, want sandbox.State) (ok bool, err error) {
	if !slices.Contains(platformMetadataKeys, key) {
		return false, fmt.Errorf("metadata key %q is not the platform's", key)
	}
	for {
		sb, err := s.store.GetSandbox(ctx, org, id)
		if err != nil || sb.State != want {
			return false, nil
		}
		if sb.Metadata == nil {
			sb.Metadata = map[string]string{}
		}
		sb.Metadata[key] = value
		_, err = s.update(ctx, sb)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return false, err
		}
	}
}

// AgentFor returns the client of the agent of a sandbox record already
// read, without access checks and without counting as activity (unlike
// RunningAgent): the platform's own work in a sandbox (making, restoring
// and saving a session's workspace) is not the user's.
func (s *Service) AgentFor(sb sandbox.Sandbox) *agentclient.Client {
	return s.agent(sb.ID, sb.Address, sb.AgentToken)
}

// KnownTemplate reports whether slug names a built-in template of this
// host or, with org set, a custom template of org that has a ready
// version. An empty org asks about built-in templates only.
func (s *Service) KnownTemplate(ctx context.Context, org, slug string) (bool, error) {
	if s.tpl.known(slug) {
		return true, nil
	}
	_, ok, err := s.latestCustom(ctx, org, slug)
	return ok, err
}

// DefaultTemplate is the template of creates that name none
// (Config.Templates.Default, ptd's --default-template).
func (s *Service) DefaultTemplate() string { return s.cfg.Templates.Default }

// PoolRuntime is the runtime class of a warm pool setting in the form the
// store keys pools by (store.Pool.Runtime): "" for the default class,
// whether named or not, so that one class never has two pools of a
// template; another class of this host as given. A class this host does
// not run is a FieldError.
func (s *Service) PoolRuntime(class string) (string, error) {
	if class == "" || class == s.cfg.DefaultRuntime {
		return "", nil
	}
	if !slices.Contains(s.host.Classes(), class) {
		return "", &sandbox.FieldError{Field: "runtime", Reason: fmt.Sprintf("must be one of %v on this host", s.host.Classes())}
	}
	return class, nil
}

// DefaultRuntime is the runtime class of sandboxes that do not ask (and of
// warm pools that name none).
func (s *Service) DefaultRuntime() string { return s.cfg.DefaultRuntime }

// HostID is the ID of the host this control plane drives.
func (s *Service) HostID() string { return s.host.ID() }

// RunsSandboxes reports whether this control plane's host runs any
// runtime class: an api-only ptd's runs none (internal/hostapi/nohost).
func (s *Service) RunsSandboxes() bool { return len(s.host.Classes()) > 0 }
