package controlplane

import (
	"context"
	"time"

	"github.com/platinum-dev/platinum/internal/hostapi"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// SweepResult counts what one sweep of the host removed.
type SweepResult struct {
	// Destroyed are sandboxes with no record, a deleted one or one another
	// host now runs (recovered there while this one was lost), whose host
	// resources were all removed (disk included).
	Destroyed []string
	// Released are failed sandboxes that still held something besides
	// their disk, which was freed.
	Released []string
	// Templates are template versions whose files this host kept after
	// their record was deleted (template_copies.go).
	Templates []string
}

// Sweep finds, on the host itself (hostapi.Sweeper), what sandboxes hold
// there and removes what no live record owns: everything of a sandbox with
// no record, a deleted one, or one recovered on another host while this
// one was lost (a runtime container a timed-out call left running, mounts,
// loop devices, network namespace and address, cgroup, disk), and
// everything but the disk of a failed one. The reconciler runs
// it at start-up and on every pass. Sandboxes in any other state are left
// alone, whatever they hold.
func (s *Service) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	sw, ok := s.host.(hostapi.Sweeper)
	if !ok {
		return res, nil
	}
	holdings, err := sw.Holdings(ctx)
	for _, h := range holdings {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if !sandbox.ValidID(sandbox.PrefixSandbox, h.ID) || s.builds.ownsBox(h.ID) {
			// A template build's own box has no record while it runs.
			continue
		}
		sb, gerr := s.store.GetSandbox(ctx, "", h.ID)
		switch {
		case store.IsNotFound(gerr):
		case gerr != nil:
			continue
		case s.elsewhere(sb):
		case sb.State == sandbox.StateDeleted && time.Since(sb.UpdatedAt) >= s.cfg.SweepGrace:
		case sb.State == sandbox.StateFailed && h.Live() && time.Since(sb.UpdatedAt) >= s.cfg.SweepGrace:
		default:
			continue
		}
		s.sweepOne(ctx, h, &res)
	}
	res.Templates = s.sweepTemplateCopies(ctx)
	if n := len(res.Destroyed) + len(res.Released); n > 0 {
		s.log.WarnContext(ctx, "swept host resources no live sandbox owns", "destroyed", res.Destroyed, "released", res.Released)
	}
	return res, err
}

// sweepOne removes what h holds, under the sandbox's lock and after
// reading its record again (it may have changed since the list).
func (s *Service) sweepOne(ctx context.Context, h hostapi.Holding, res *SweepResult) {
	unlock := s.locks.Lock(h.ID)
	defer unlock()
	sb, err := s.store.GetSandbox(ctx, "", h.ID)
	switch {
	case store.IsNotFound(err) || err == nil && (sb.State == sandbox.StateDeleted || s.elsewhere(sb)):
		if err := s.host.Destroy(ctx, h.ID); err != nil {
			s.log.WarnContext(ctx, "sweep: destroy", "sandbox", h.ID, "err", err)
			return
		}
		res.Destroyed = append(res.Destroyed, h.ID)
	case err == nil && sb.State == sandbox.StateFailed:
		r, ok := s.host.(hostapi.Releaser)
		if !ok {
			return
		}
		if err := r.Release(ctx, h.ID); err != nil {
			s.log.WarnContext(ctx, "sweep: release", "sandbox", h.ID, "err", err)
			return
		}
		res.Released = append(res.Released, h.ID)
	}
}
