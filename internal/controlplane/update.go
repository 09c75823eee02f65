package controlplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Patch changes a sandbox's mutable fields. Nil fields stay as they are.
type Patch struct {
	// Name: nil keeps it; a pointer to "" clears it.
	Name       *string
	AutoResume *bool
	// Metadata, when set, replaces the whole map (the compatibility
	// surfaces' label updates); the create limits apply.
	Metadata *map[string]string
	// Retention, when set, replaces the lifecycle timers (a type of
	// ephemeral deletes the sandbox at its next stop).
	Retention *sandbox.Retention
	// SSHKeys, when set, replaces the SSH gateway's keys (empty removes
	// them all).
	SSHKeys *[]string
}

// Update applies a patch. Names are unique per org among live sandboxes:
// a taken name is a conflict.
func (s *Service) Update(ctx context.Context, p Principal, id string, pt Patch) (sandbox.Sandbox, error) {
	if pt.Name != nil && *pt.Name != "" && !nameRE.MatchString(*pt.Name) {
		return sandbox.Sandbox{}, &sandbox.FieldError{Field: "name", Reason: "must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"}
	}
	if pt.Metadata != nil {
		if err := validateUserMetadata(*pt.Metadata); err != nil {
			return sandbox.Sandbox{}, err
		}
	}
	if r := pt.Retention; r != nil {
		if _, ok := sandbox.DefaultRetention(r.Type); !ok {
			return sandbox.Sandbox{}, &sandbox.FieldError{Field: "type", Reason: "must be persistent, ephemeral or dev"}
		}
		for _, v := range []int{r.AutoStopMinutes, r.AutoArchiveDays, r.AutoDeleteDays} {
			if v < 0 || v > 100000 {
				return sandbox.Sandbox{}, &sandbox.FieldError{Field: "retention", Reason: "timers must be between 0 (disabled) and 100000"}
			}
		}
	}
	var sshKeys []string
	if pt.SSHKeys != nil {
		var err error
		if sshKeys, err = ParseSSHKeys(*pt.SSHKeys); err != nil {
			return sandbox.Sandbox{}, err
		}
		if len(sshKeys) == 0 {
			sshKeys = nil
		}
	}
	for {
		sb, err := s.getForWrite(ctx, p, id)
		if err != nil {
			return sb, err
		}
		if pt.Name != nil {
			sb.Name = *pt.Name
		}
		if pt.AutoResume != nil {
			sb.NoAutoResume = !*pt.AutoResume
		}
		if pt.Metadata != nil {
			md := maps.Clone(nonNil(*pt.Metadata))
			for _, k := range platformMetadataKeys {
				if v, ok := sb.Metadata[k]; ok {
					md[k] = v
				}
			}
			sb.Metadata = md
		}
		if pt.SSHKeys != nil {
			sb.SSHKeys = sshKeys
		}
		if pt.Retention != nil {
			sb.Retention = *pt.Retention
			if sb.Retention.Type == "" {
				sb.Retention.Type = sandbox.TypePersistent
			}
		}
		out, err := s.update(ctx, sb)
		if errors.Is(err, store.ErrConflict) {
			if cur, gerr := s.store.GetSandbox(ctx, "", id); gerr == nil && cur.Version == sb.Version {
				return sandbox.Sandbox{}, fmt.Errorf("name %q is taken by another live sandbox: %w", sb.Name, sandbox.ErrConflict)
			}
			continue
		}
		return out, err
	}
}

// EnvResult is what an env patch reports: the key names (never values)
// and when the change applies.
type EnvResult struct {
	Sandbox sandbox.Sandbox
	// Applies is next_exec for a running sandbox (new commands see it at
	// once) and next_start otherwise.
	Applies string
}

// ErrEnvTooLarge is the merged environment over MaxEnvTotalBytes.
var ErrEnvTooLarge = errors.New("env too large")

// PatchEnv merges changes into the sandbox's environment: a nil value
// removes the key, unmentioned keys stay. The merge runs under the
// sandbox's row lock (store.ModifySandbox), so concurrent patches apply one
// after another against the latest committed environment, and the merged
// result is checked as a whole: a rejected patch changes nothing.
func (s *Service) PatchEnv(ctx context.Context, p Principal, id string, changes map[string]*string) (EnvResult, error) {
	set := map[string]string{}
	for k, v := range changes {
		if v != nil {
			set[k] = *v
		} else if !envKeyRE.MatchString(k) {
			return EnvResult{}, &sandbox.FieldError{Field: "env", Reason: fmt.Sprintf("key %q must match [A-Za-z_][A-Za-z0-9_]*", k)}
		}
	}
	if err := validateEnvVars(set); err != nil {
		return EnvResult{}, err
	}
	// Get checks the principal may see the sandbox; the merge itself reads
	// the record again under the lock.
	sb, err := s.Get(ctx, p, id, false)
	if err != nil {
		return EnvResult{}, err
	}
	out, err := s.store.ModifySandbox(ctx, sb.OrgID, id, func(cur *sandbox.Sandbox) error {
		switch cur.State {
		case sandbox.StateDeleted:
			return fmt.Errorf("sandbox %q was deleted: %w", id, sandbox.ErrNotFound)
		case sandbox.StateDeleting:
			return fmt.Errorf("sandbox %q is being deleted: %w", id, sandbox.ErrNotFound)
		}
		merged := make(map[string]string, len(cur.Env)+len(set))
		for k, v := range cur.Env {
			merged[k] = v
		}
		for k, v := range changes {
			if v == nil {
				delete(merged, k)
			} else {
				merged[k] = *v
			}
		}
		if n := envBytes(merged); n > MaxEnvTotalBytes {
			return fmt.Errorf("the merged environment would be %d bytes; the limit is %d: %w", n, MaxEnvTotalBytes, ErrEnvTooLarge)
		}
		cur.Env = merged
		return nil
	})
	if err != nil {
		return EnvResult{}, err
	}
	s.notify.Broadcast(id)
	res := EnvResult{Sandbox: out, Applies: "next_start"}
	if out.State == sandbox.StateRunning {
		res.Applies = "next_exec"
		if err := s.pushEnv(ctx, id); err != nil {
			return EnvResult{}, err
		}
	}
	return res, nil
}

// pushEnv hands the latest committed environment to the running agent.
// It re-reads under the sandbox's lock, so concurrent patches can never
// leave the agent with an older environment than the store.
func (s *Service) pushEnv(ctx context.Context, id string) error {
	unlock := s.locks.Lock(id)
	defer unlock()
	sb, err := s.store.GetSandbox(ctx, "", id)
	if err != nil || sb.State != sandbox.StateRunning {
		return err
	}
	if s.noAgentInit {
		return nil
	}
	return s.agent(sb.ID, sb.Address, sb.AgentToken).Init(ctx, s.sandboxEnv(sb))
}

func envBytes(env map[string]string) int {
	n := 0
	for k, v := range env {
		n += len(k) + 1 + len(v) + 1
	}
	return n
}

// Children lists the sandboxes whose parent is id (any state but deleted).
func (s *Service) Children(ctx context.Context, p Principal, id string) ([]sandbox.Sandbox, error) {
	if _, err := s.Get(ctx, p, id, true); err != nil {
		return nil, err
	}
	rows, _, err := s.store.ListSandboxes(ctx, store.ListOptions{OrgID: p.OrgID, ParentID: id})
	return rows, err
}

// liveChildren returns the IDs of id's children that are not deleted.
func (s *Service) liveChildren(ctx context.Context, orgID, id string) ([]string, error) {
	rows, _, err := s.store.ListSandboxes(ctx, store.ListOptions{OrgID: orgID, ParentID: id})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range rows {
		if r.State.Live() {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// ChildrenError is a delete refused because the sandbox has live children.
type ChildrenError struct{ Children []string }

func (e *ChildrenError) Error() string {
	return fmt.Sprintf("sandbox has %d live children; delete them first: %v", len(e.Children), e.Children)
}

// Unwrap makes errors.Is(err, sandbox.ErrConflict) hold.
func (e *ChildrenError) Unwrap() error { return sandbox.ErrConflict }
