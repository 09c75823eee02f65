package controlplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/platinum-dev/platinum/internal/crashpoint"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// PreviewIssuer signs preview tokens and renders preview URLs. The preview
// proxy (internal/preview) implements it, because it alone knows its
// signing key, listener and domain; the control plane decides who may get
// a token and which generation it carries.
type PreviewIssuer interface {
	// Issue returns the URLs of sandboxID's port and a token for them,
	// signed with generation gen and valid until expires (zero: no
	// expiry).
	Issue(sandboxID string, port int, gen int64, expires time.Time) PreviewURL
}

// PreviewURL is how to reach one port of a sandbox through the preview
// proxy.
type PreviewURL struct {
	SandboxID string
	Port      int
	// URL is the host-routed form (<port>-<id>.<domain>); PathURL the
	// path form for clients that cannot set Host.
	URL, PathURL string
	// Token must accompany requests (X-Pt-Preview-Token, or pt_token once
	// to get a cookie) unless the port is public.
	Token string
	// ExpiresAt is when Token stops working; nil means never (until
	// revoked).
	ExpiresAt *time.Time
	// Public is true when the port answers without a token.
	Public bool
}

// MaxPreviewExpiry caps a preview token's lifetime.
const MaxPreviewExpiry = 365 * 24 * time.Hour

// ErrAutoResumeDisabled is a preview request to a stopped sandbox whose
// auto_resume is off: only start or resume brings it back.
var ErrAutoResumeDisabled = errors.New("auto-resume-disabled")

func validPreviewPort(port int) error {
	if port < sandbox.MinPreviewPort || port > sandbox.MaxPreviewPort {
		return &sandbox.FieldError{Field: "port", Reason: "must be 1-65535"}
	}
	if port == AgentPort {
		return &sandbox.FieldError{Field: "port", Reason: fmt.Sprintf("%d is pt-agent's port and is not served by the preview proxy", AgentPort)}
	}
	return nil
}

// PreviewURL returns the preview URLs of a port of p's sandbox id and a
// token for them valid for expiresIn (0: until revoked). It returns
// ErrNotFound for a sandbox p cannot see, ErrInvalidArgument for a bad
// port or lifetime and ErrUnavailable when no preview proxy runs.
func (s *Service) PreviewURL(ctx context.Context, p Principal, id string, port int, expiresIn time.Duration) (PreviewURL, error) {
	if err := validPreviewPort(port); err != nil {
		return PreviewURL{}, err
	}
	if expiresIn < 0 || expiresIn > MaxPreviewExpiry {
		return PreviewURL{}, &sandbox.FieldError{Field: "expires_in_seconds", Reason: fmt.Sprintf("must be 0 (no expiry) to %d", int(MaxPreviewExpiry.Seconds()))}
	}
	if s.cfg.Preview == nil {
		return PreviewURL{}, fmt.Errorf("preview proxy: not enabled on this server: %w", sandbox.ErrUnavailable)
	}
	sb, err := s.Get(ctx, p, id, false)
	if err != nil {
		return PreviewURL{}, err
	}
	return s.issuePreview(sb, port, expiresIn), nil
}

func (s *Service) issuePreview(sb sandbox.Sandbox, port int, expiresIn time.Duration) PreviewURL {
	var exp time.Time
	if expiresIn > 0 {
		exp = s.now().Add(expiresIn).Truncate(time.Second)
	}
	u := s.cfg.Preview.Issue(sb.ID, port, sb.Preview.Generation(port), exp)
	u.Public = sb.Preview.IsPublic(port)
	return u
}

// SetPreviewPublic makes a port of p's sandbox id reachable through the
// preview proxy without a token (public true) or only with one, and
// returns its URLs with a fresh token (no expiry).
func (s *Service) SetPreviewPublic(ctx context.Context, p Principal, id string, port int, public bool) (PreviewURL, error) {
	if err := validPreviewPort(port); err != nil {
		return PreviewURL{}, err
	}
	if s.cfg.Preview == nil {
		return PreviewURL{}, fmt.Errorf("preview proxy: not enabled on this server: %w", sandbox.ErrUnavailable)
	}
	sb, err := s.updatePreview(ctx, p, id, func(pv *sandbox.Preview) {
		pv.Public = slices.DeleteFunc(pv.Public, func(q int) bool { return q == port })
		if public {
			pv.Public = append(pv.Public, port)
			slices.Sort(pv.Public)
		}
	})
	if err != nil {
		return PreviewURL{}, err
	}
	return s.issuePreview(sb, port, 0), nil
}

// RevokePreview ends every token issued so far for a port of p's sandbox
// id (the port's generation moves on) and makes the port private again.
// New tokens come from PreviewURL.
func (s *Service) RevokePreview(ctx context.Context, p Principal, id string, port int) error {
	if err := validPreviewPort(port); err != nil {
		return err
	}
	_, err := s.updatePreview(ctx, p, id, func(pv *sandbox.Preview) {
		pv.Public = slices.DeleteFunc(pv.Public, func(q int) bool { return q == port })
		if pv.Gen == nil {
			pv.Gen = map[int]int64{}
		}
		pv.Gen[port]++
	})
	return err
}

// updatePreview applies mutate to a copy of the sandbox's preview
// settings and stores it with compare-and-swap, retrying on conflicts.
func (s *Service) updatePreview(ctx context.Context, p Principal, id string, mutate func(*sandbox.Preview)) (sandbox.Sandbox, error) {
	for {
		sb, err := s.getForWrite(ctx, p, id)
		if err != nil {
			return sb, err
		}
		pv := &sandbox.Preview{}
		if sb.Preview != nil {
			pv.Public = slices.Clone(sb.Preview.Public)
			pv.Gen = maps.Clone(sb.Preview.Gen)
		}
		mutate(pv)
		sb.Preview = pv
		out, err := s.update(ctx, sb)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		return out, err
	}
}

// getForWrite reads the sandbox a compare-and-swap write of its settings
// starts from. A sandbox being deleted is refused (returned with the
// StateError): a write now would race its deletion for nothing.
func (s *Service) getForWrite(ctx context.Context, p Principal, id string) (sandbox.Sandbox, error) {
	sb, err := s.Get(ctx, p, id, false)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if sb.State == sandbox.StateDeleting {
		return sb, &StateError{State: sb.State, Want: "not being deleted"}
	}
	return sb, nil
}

// PreviewTarget returns the live sandbox id in any org, for the preview
// proxy: its requests carry a preview token (or reach a public port), never
// an API key, and the proxy checks that token itself. It returns
// ErrNotFound when no live sandbox has that id.
func (s *Service) PreviewTarget(ctx context.Context, id string) (sandbox.Sandbox, error) {
	if !sandbox.ValidID(sandbox.PrefixSandbox, id) {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", id, sandbox.ErrNotFound)
	}
	sb, err := s.store.GetSandbox(ctx, "", id)
	if err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", id, err)
	}
	if !sb.State.Live() {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox %q: %w", id, sandbox.ErrNotFound)
	}
	return sb, nil
}

// AutoResume brings sandbox id to running for a preview request that
// passed the token check (docs/lifecycle.md, "Auto-resume"): a stopped or archived
// sandbox is started (unarchived first) unless its auto_resume is off
// (ErrAutoResumeDisabled); one already starting is waited for. It waits at
// most timeout and returns the running record, a StateError when the
// sandbox cannot run (failed, deleting) or context.DeadlineExceeded.
// Callers coalesce concurrent calls per sandbox; Start's compare-and-swap
// keeps it to one start even when they do not.
func (s *Service) AutoResume(ctx context.Context, id string, timeout time.Duration) (sandbox.Sandbox, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		sb, err := s.PreviewTarget(ctx, id)
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		p := Principal{OrgID: sb.OrgID}
		switch sb.State {
		case sandbox.StateRunning:
			return sb, nil
		case sandbox.StateStopped, sandbox.StateArchived:
			if sb.NoAutoResume {
				return sb, fmt.Errorf("sandbox %q: %w", id, ErrAutoResumeDisabled)
			}
			if _, err := s.Start(ctx, p, id); err != nil {
				var se *StateError
				if errors.As(err, &se) {
					continue // it moved meanwhile; look again
				}
				return sb, err
			}
			s.log.InfoContext(ctx, "sandbox auto-resumed by preview traffic", "sandbox", id, "from", sb.State)
			crashpoint.Hit("preview.resuming") // the start is recorded, the sandbox not yet running
		case sandbox.StateStarting, sandbox.StateRestoring, sandbox.StateCreating:
		case sandbox.StateStopping, sandbox.StateArchiving:
			// Let the stop (or archive) finish, then start it. WaitFor
			// counts archiving as stopped, so an archive is waited for
			// in short rounds until it settles (archived, or stopped
			// again when it failed).
			target := sandbox.StateStopped
			if sb.State == sandbox.StateArchiving {
				target = sandbox.StateArchived
			}
			if _, _, err := s.WaitFor(ctx, p, id, target, time.Second); err != nil {
				return sb, err
			}
			if ctx.Err() != nil {
				return sb, ctx.Err()
			}
			continue
		default:
			return sb, &StateError{State: sb.State, Want: "running, stopped or archived"}
		}
		sb, ok, err := s.WaitFor(ctx, p, id, sandbox.StateRunning, 0)
		if err != nil {
			return sb, err
		}
		if !ok {
			if ctx.Err() != nil {
				return sb, ctx.Err()
			}
			if sb.State == sandbox.StateFailed || !sb.State.Live() {
				return sb, &StateError{State: sb.State, Want: "running"}
			}
			continue
		}
		s.Touch(id)
		return sb, nil
	}
}
