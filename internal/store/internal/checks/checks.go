// Package checks holds the rules a write applies to the stored record
// before it writes: the same in both SQL stores, which differ only in how
// they hold the row still while they check (SQLite's one write
// transaction, PostgreSQL's row locks).
package checks

import (
	"errors"
	"fmt"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// SandboxUpdate judges UpdateSandbox's read of the stored org and version
// of sb's row; err is that read's error and noRows the driver's "no row".
// A row of another org is not found; a version other than sb's is a
// conflict.
func SandboxUpdate(sb sandbox.Sandbox, orgID string, version int64, err, noRows error) error {
	if errors.Is(err, noRows) || (err == nil && sb.OrgID != "" && sb.OrgID != orgID) {
		return fmt.Errorf("sandbox %q: %w", sb.ID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("update sandbox %q: %w", sb.ID, err)
	}
	if version != sb.Version {
		return fmt.Errorf("sandbox %q: version %d, stored %d: %w", sb.ID, sb.Version, version, store.ErrConflict)
	}
	return nil
}

// SandboxModify is ModifySandbox's change of the stored cur: not found in
// another org than orgID (unless empty); else fn's edit of a copy, with
// the fields fn may not change put back.
func SandboxModify(cur sandbox.Sandbox, orgID string, fn func(*sandbox.Sandbox) error) (sandbox.Sandbox, error) {
	if orgID != "" && cur.OrgID != orgID {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", cur.ID, store.ErrNotFound)
	}
	sb := cur
	if err := fn(&sb); err != nil {
		return sandbox.Sandbox{}, err
	}
	sb.ID, sb.OrgID, sb.CreatedAt, sb.Version = cur.ID, cur.OrgID, cur.CreatedAt, cur.Version
	return sb, nil
}

// HostState judges SetHostState's move of the stored host cur to state at
// generation gen (any when 0): a conflict if the host has moved on to
// another generation, or is lost (it comes back only by registering). It
// says whether the state changes, which restarts StateChangedAt.
func HostState(cur store.HostRecord, gen int64, state store.HostState) (changed bool, err error) {
	if gen > 0 && cur.Generation != gen {
		return false, fmt.Errorf("host %q is at generation %d, not %d: %w", cur.ID, cur.Generation, gen, store.ErrConflict)
	}
	if cur.State == store.HostLost && state != store.HostLost {
		return false, fmt.Errorf("host %q is lost; it becomes %s by registering again: %w", cur.ID, state, store.ErrConflict)
	}
	return cur.State != state, nil
}

// SandboxPurge judges PurgeSandbox's read of the stored state of sandbox
// id; err is that read's error and noRows the driver's "no row". Only a
// deleted sandbox is purged.
func SandboxPurge(id, state string, err, noRows error) error {
	if errors.Is(err, noRows) {
		return fmt.Errorf("sandbox %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("purge sandbox %q: %w", id, err)
	}
	if sandbox.State(state) != sandbox.StateDeleted {
		return fmt.Errorf("sandbox %q is %s, not deleted: %w", id, state, store.ErrConflict)
	}
	return nil
}

// SandboxAdopt is AdoptSandbox's condition on the stored cur: still in
// fromOrgID, at sb's version. It returns the record to write: sb's
// ownership, naming, env, metadata, lifecycle fields and CreatedAt over
// cur's state, size and host fields.
func SandboxAdopt(cur sandbox.Sandbox, fromOrgID string, sb sandbox.Sandbox) (sandbox.Sandbox, error) {
	if cur.OrgID != fromOrgID {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", sb.ID, store.ErrNotFound)
	}
	if cur.Version != sb.Version {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: version %d, stored %d: %w", sb.ID, sb.Version, cur.Version, store.ErrConflict)
	}
	out := sb
	out.State, out.Reason = cur.State, cur.Reason
	out.Template, out.TemplateVersionID = cur.Template, cur.TemplateVersionID
	out.CPU, out.RAMMB, out.DiskGB = cur.CPU, cur.RAMMB, cur.DiskGB
	out.HostID, out.Address, out.AgentToken = cur.HostID, cur.Address, cur.AgentToken
	out.Runtime, out.LastStart, out.Live = cur.Runtime, cur.LastStart, cur.Live
	out.APIToken, out.DeletedAt = cur.APIToken, cur.DeletedAt
	return out, nil
}

// WebhookCursor judges AdvanceWebhook's read of the stored cursor; err is
// that read's error and noRows the driver's "no row". The webhook must
// exist and its cursor still be at from: another sender that moved it
// first makes this advance a conflict.
func WebhookCursor(id string, cursor, from int64, err, noRows error) error {
	if errors.Is(err, noRows) {
		return fmt.Errorf("webhook %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return err
	}
	if cursor != from {
		return fmt.Errorf("webhook %q: cursor is %d, not %d: %w", id, cursor, from, store.ErrConflict)
	}
	return nil
}

// PoolClaim judges ClaimPoolSandbox's pick of a ready sandbox of
// template's pool; err is that read's error and noRows the driver's "no
// row": an empty pool is not found.
func PoolClaim(template string, err, noRows error) error {
	if errors.Is(err, noRows) {
		return fmt.Errorf("pool %q: no ready sandbox: %w", template, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("claim from pool %q: %w", template, err)
	}
	return nil
}
