package controlplane

import (
	"context"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// SetWarmDemand tells the warm pools (internal/sessions) of each create a
// pool of its template and runtime class ("" the default, PoolRuntime)
// could serve: handed one of its sandboxes (warm), or booted cold because
// the pool had none ready (once the cold create is stored: a refused
// create is nobody's demand). Auto pools size themselves from these
// (docs/sessions.md, "Demand-sized pools"). It is called once the claim
// has answered, so a refill it starts does not compete with the
// hand-over. Creates a pool could not serve anyway (a size it cannot
// take, no ready template version) are not demand. Call it before
// serving.
func (s *Service) SetWarmDemand(fn func(ctx context.Context, template, runtime string, warm bool)) {
	s.warmDemand = fn
}

// noteWarmDemand passes one create's demand on (SetWarmDemand).
func (s *Service) noteWarmDemand(ctx context.Context, template, runtime string, warm bool) {
	if s.warmDemand != nil {
		s.warmDemand(ctx, template, runtime, warm)
	}
}

// noteColdDemand passes on a cold create of sb, stored, that its pool
// could have served had it had a sandbox ready.
func (s *Service) noteColdDemand(ctx context.Context, sb sandbox.Sandbox) {
	if class, err := s.PoolRuntime(sb.Runtime); err == nil {
		s.noteWarmDemand(ctx, sb.Template, class, false)
	}
}
