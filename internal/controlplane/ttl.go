package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// TTLConfig tunes sandbox lifetimes (TTLs) and statuses (docs/lifecycle.md).
type TTLConfig struct {
	// Default is the TTL of a create that names no ttl_ms but gets one
	// (see TemplateConfig.SessionTemplates): one hour.
	Default time.Duration
	// MaxCreate is the plan limit of ttl_ms at create (1 hour); more is
	// sandbox_ttl_exceeded.
	MaxCreate time.Duration
	// MaxSession bounds a TTL reset: expires_at may be at most this long
	// after the sandbox's creation (24 hours).
	MaxSession time.Duration
	// ExpiringWindow is the time before expires_at during which a live
	// sandbox's status is expiring (the last minute).
	ExpiringWindow time.Duration
	// IdleAfter is how long a running sandbox without exec, file or
	// preview traffic waits before its status is idle.
	IdleAfter time.Duration
}

// DefaultTTLConfig returns the defaults docs/lifecycle.md states.
func DefaultTTLConfig() TTLConfig {
	return TTLConfig{
		Default:        time.Hour,
		MaxCreate:      time.Hour,
		MaxSession:     24 * time.Hour,
		ExpiringWindow: sandbox.DefaultExpiringWindow,
		IdleAfter:      sandbox.DefaultIdleAfter,
	}
}

// TemplateConfig tunes template choice at create.
type TemplateConfig struct {
	// Default is the template of a create that names neither a template
	// nor a template version (python-node).
	Default string
	// SessionTemplates are the templates whose sandboxes are short-lived
	// work (an agent's run): a create from one that names no ttl_ms and no
	// retention field gets TTLConfig.Default and no auto-stop. Every other
	// template (pt-base, busybox) keeps its type's retention timers and no
	// TTL ("Which default applies" in docs/lifecycle.md).
	SessionTemplates []string
}

// DefaultTemplateConfig returns python-node as the default template, with
// python-node and node as session templates.
func DefaultTemplateConfig() TemplateConfig {
	return TemplateConfig{Default: "python-node", SessionTemplates: []string{"python-node", "node"}}
}

// TTLExceededError is a TTL over the plan limit at create or past the
// session limit on a reset (sandbox_ttl_exceeded).
type TTLExceededError struct {
	// MaxTTLMs is the largest ttl_ms the request could have asked for.
	MaxTTLMs int64
	// Limit names the limit: "create" (1 hour at creation) or "session"
	// (24 hours since creation).
	Limit string
	// Max is that limit's duration.
	Max time.Duration
}

// Error implements error.
func (e *TTLExceededError) Error() string {
	if e.Limit == "session" {
		return fmt.Sprintf("ttl_ms would take the sandbox past %s since its creation (the session limit); at most %d ms from now", e.Max, e.MaxTTLMs)
	}
	return fmt.Sprintf("ttl_ms exceeds the plan limit at creation (%s): at most %d ms", e.Max, e.MaxTTLMs)
}

// Unwrap makes errors.Is(err, sandbox.ErrInvalidArgument) hold.
func (e *TTLExceededError) Unwrap() error { return sandbox.ErrInvalidArgument }

// DestroyedError is an operation on a destroyed (deleting or deleted)
// sandbox that only live ones take (sandbox_destroyed).
type DestroyedError struct {
	ID, Reason string
}

// Error implements error.
func (e *DestroyedError) Error() string {
	return fmt.Sprintf("sandbox %s is destroyed (%s)", e.ID, e.Reason)
}

// Unwrap makes errors.Is(err, sandbox.ErrConflict) hold.
func (e *DestroyedError) Unwrap() error { return sandbox.ErrConflict }

// ttlFor resolves a create's lifetime: an explicit ttl_ms (validated
// against the plan limit), the session default for session templates, or
// the internal TTL a compatibility surface set (E2B's timeout, which has
// its own limits). session reports whether the session templates' defaults apply.
func (s *Service) ttlFor(r *CreateRequest) (ttl time.Duration, session bool, err error) {
	if r.TTLMs != nil {
		ms := *r.TTLMs
		if ms <= 0 {
			return 0, false, &sandbox.FieldError{Field: "ttl_ms", Reason: "must be a positive integer (milliseconds)"}
		}
		if max := s.cfg.TTL.MaxCreate; time.Duration(ms)*time.Millisecond > max {
			return 0, false, &TTLExceededError{MaxTTLMs: max.Milliseconds(), Limit: "create", Max: max}
		}
		return time.Duration(ms) * time.Millisecond, true, nil
	}
	if r.TTL != 0 {
		return r.TTL, false, nil
	}
	retentionNamed := r.Type != "" || r.AutoStopMinutes != nil || r.AutoArchiveDays != nil || r.AutoDeleteDays != nil
	if !retentionNamed && slices.Contains(s.cfg.Templates.SessionTemplates, r.Template) {
		return s.cfg.TTL.Default, true, nil
	}
	return 0, false, nil
}

// SetTTL resets a live sandbox's countdown: it expires ttlMs after now,
// as long as that is within TTLConfig.MaxSession of its creation
// (TTLExceededError otherwise). A destroyed sandbox is a DestroyedError.
func (s *Service) SetTTL(ctx context.Context, p Principal, id string, ttlMs int64) (sandbox.Sandbox, error) {
	if ttlMs <= 0 {
		return sandbox.Sandbox{}, &sandbox.FieldError{Field: "ttl_ms", Reason: "must be a positive integer (milliseconds)"}
	}
	ttl := time.Duration(ttlMs) * time.Millisecond
	for {
		sb, err := s.Get(ctx, p, id, true)
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		if !sb.State.Live() {
			return sandbox.Sandbox{}, &DestroyedError{ID: sb.ID, Reason: sb.Reason}
		}
		now := s.now()
		limit := sb.CreatedAt.Add(s.cfg.TTL.MaxSession)
		exp := now.Add(ttl).Truncate(time.Microsecond)
		if exp.After(limit) {
			return sandbox.Sandbox{}, &TTLExceededError{MaxTTLMs: max(0, limit.Sub(now).Milliseconds()), Limit: "session", Max: s.cfg.TTL.MaxSession}
		}
		sb.ExpiresAt, sb.TTLMs = &exp, ttlMs
		if sb.ExpiryAction == "" {
			sb.ExpiryAction = sandbox.ExpireDelete
		}
		out, err := s.update(ctx, sb)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		s.log.InfoContext(ctx, "sandbox ttl reset", "sandbox", id, "ttl_ms", ttlMs, "expires_at", exp)
		s.derive(ctx, &out)
		return out, nil
	}
}

// Kill destroys a sandbox (reason user_killed) and answers with its record,
// status destroyed. It is idempotent by state: a sandbox already destroyed
// (deleting or deleted, for any reason) is returned as it is. Like delete,
// a sandbox with live children is a ChildrenError.
func (s *Service) Kill(ctx context.Context, p Principal, id string) (sandbox.Sandbox, error) {
	sb, err := s.Get(ctx, p, id, true)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if sb.State.Live() {
		kids, err := s.liveChildren(ctx, p.OrgID, id)
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		if len(kids) > 0 {
			return sandbox.Sandbox{}, &ChildrenError{Children: kids}
		}
		if sb, err = s.deleteWithReason(ctx, id, "user_killed"); err != nil {
			return sandbox.Sandbox{}, err
		}
	}
	s.derive(ctx, &sb)
	return sb, nil
}

// derive fills the read-only fields of a record: its status (from
// activity in memory) and its template version number.
func (s *Service) derive(ctx context.Context, sb *sandbox.Sandbox) {
	in := sandbox.StatusInput{Now: s.now(), Busy: s.busy.Count(sb.ID),
		IdleAfter: s.cfg.TTL.IdleAfter, ExpiringWindow: s.cfg.TTL.ExpiringWindow}
	s.activityMu.Lock()
	in.LastActivity = s.activity[sb.ID]
	s.activityMu.Unlock()
	sb.Status = sandbox.StatusOf(*sb, in)
	if sb.TemplateVersionID != "" {
		sb.TemplateVersion = s.tpl.number(ctx, sb.TemplateVersionID)
	}
}

// listExclusions returns the states a list leaves out unless asked:
// destroyed (deleting; deleted are left out by the store) and failed.
func listExclusions(include []string) (exclude []sandbox.State, includeDeleted bool, err error) {
	destroyed, failed := false, false
	for _, v := range include {
		switch v {
		case "destroyed":
			destroyed = true
		case "failed":
			failed = true
		default:
			return nil, false, &sandbox.FieldError{Field: "include", Reason: fmt.Sprintf("unknown value %q; use destroyed and/or failed", v)}
		}
	}
	if !destroyed {
		exclude = append(exclude, sandbox.StateDeleting)
	}
	if !failed {
		exclude = append(exclude, sandbox.StateFailed)
	}
	return exclude, destroyed, nil
}
