package controlplane

import (
	"context"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Stop moves a running sandbox to stopped, keeping its disk and spec, and
// its memory where the host can. It is idempotent: stopping a stopped
// sandbox returns it unchanged. The work happens in the background; wait
// with WaitFor(…, StateStopped, …).
func (s *Service) Stop(ctx context.Context, p Principal, id string) (sandbox.Sandbox, error) {
	return sandbox.Sandbox{}, fmt.Errorf("stop: %w", sandbox.ErrUnavailable)
}

// Start brings a stopped (or archived) sandbox back to running; calling it
// on a running sandbox returns it unchanged. The work happens in the
// background; wait with WaitFor(…, StateRunning, …). Once running, the
// record's LastStart says whether memory came back.
func (s *Service) Start(ctx context.Context, p Principal, id string) (sandbox.Sandbox, error) {
	return sandbox.Sandbox{}, fmt.Errorf("start: %w", sandbox.ErrUnavailable)
}

// SetExpiry sets when the sandbox expires and what happens then; a zero
// time clears the expiry.
func (s *Service) SetExpiry(ctx context.Context, p Principal, id string, at time.Time, action sandbox.ExpiryAction) (sandbox.Sandbox, error) {
	return sandbox.Sandbox{}, fmt.Errorf("set expiry: %w", sandbox.ErrUnavailable)
}

// AgentEndpoint returns a running sandbox's agent address (host:port) and
// access token, for transports that route traffic straight to pt-agent
// (E2B's envd protocol). A sandbox that is not running is a StateError.
func (s *Service) AgentEndpoint(ctx context.Context, p Principal, id string) (addr, token string, err error) {
	sb, err := s.Get(ctx, p, id, false)
	if err != nil {
		return "", "", err
	}
	if sb.State != sandbox.StateRunning {
		return "", "", &StateError{State: sb.State}
	}
	return fmt.Sprintf("%s:%d", sb.Address, AgentPort), sb.AgentToken, nil
}
