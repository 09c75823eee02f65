package controlplane

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Fencing (docs/ARCHITECTURE.md, "Many hosts"): a host that cannot reach
// the store stops what its sandboxes run before the other ptd processes
// can mark it lost and recover those sandboxes on another host, so one
// sandbox never runs in two places. The registrar calls Fence when its
// heartbeats have failed for --host-fence-after, and Unfence once one
// gets through again.

// fenceStopTimeout bounds stopping one sandbox while fencing.
const fenceStopTimeout = 30 * time.Second

// fenced are the sandboxes Fence stopped, for Unfence.
type fenced struct {
	mu  sync.Mutex
	ids []string
}

// Fence stops every sandbox this host runs, keeping its memory where the
// class can (a runc sandbox is frozen in RAM, a gVisor one checkpointed):
// the store cannot be reached, so it reads nothing from it, and takes no
// sandbox lock (a holder may be stuck on the store). A template build's
// box is left alone: it runs nowhere else.
func (s *Service) Fence(ctx context.Context) {
	sw, ok := s.host.(hostapi.Sweeper)
	if !ok {
		return
	}
	holdings, err := sw.Holdings(ctx)
	if err != nil {
		s.log.ErrorContext(ctx, "fence: list the host's sandboxes", "err", err)
	}
	for _, h := range holdings {
		if !h.Container || !sandbox.ValidID(sandbox.PrefixSandbox, h.ID) || s.builds.ownsBox(h.ID) {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, fenceStopTimeout)
		kept, err := s.host.Stop(sctx, h.ID, true)
		cancel()
		if err != nil {
			s.log.ErrorContext(ctx, "fence: stop", "sandbox", h.ID, "err", err)
			continue
		}
		s.fenced.mu.Lock()
		if !slices.Contains(s.fenced.ids, h.ID) {
			s.fenced.ids = append(s.fenced.ids, h.ID)
		}
		s.fenced.mu.Unlock()
		s.forgetAgent(h.ID)
		s.log.WarnContext(ctx, "sandbox fenced", "sandbox", h.ID, "memory_kept", kept)
	}
}

// Unfence starts again, from the memory Fence kept, each fenced sandbox
// whose record still says it runs here. One the others recovered
// elsewhere, or failed, while this host was cut off is left to the sweep,
// which destroys or frees what it holds here (Sweep).
func (s *Service) Unfence(ctx context.Context) {
	s.fenced.mu.Lock()
	ids := s.fenced.ids
	s.fenced.ids = nil
	s.fenced.mu.Unlock()
	for _, id := range ids {
		s.unfence(ctx, id)
	}
}

func (s *Service) unfence(ctx context.Context, id string) {
	unlock := s.locks.Lock(id)
	defer unlock()
	sb, err := s.store.GetSandbox(ctx, "", id)
	if err != nil || sb.State != sandbox.StateRunning || s.elsewhere(sb) || s.host.Running(ctx, id) {
		return
	}
	log := s.log.With("sandbox", id)
	inst, err := s.boot(ctx, sb)
	if err != nil {
		if ctx.Err() == nil {
			log.ErrorContext(ctx, "unfence", "err", err)
			s.markFailed(ctx, id, sandbox.StateRunning, "start after the host reached the store again: "+err.Error(), nil)
		}
		return
	}
	s.forgetAgent(id)
	s.transition(ctx, id, sandbox.StateRunning, sandbox.StateRunning, func(sb *sandbox.Sandbox) { sb.Address = inst.Address })
	if !inst.MemoryRestored {
		s.event(ctx, sb, "processes_lost", map[string]any{"reason": "fenced while its host could not reach the store", "action": "restarted"})
	}
	log.WarnContext(ctx, "sandbox unfenced", "memory_restored", inst.MemoryRestored)
}
