package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/hostreg"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Relocation (docs/stop-start.md, "Starting while the host is busy"): a
// start this host's admission refuses moves the stopped sandbox to another
// host through its stop snapshot (stopsnap.go) when
// --start-relocate-on-capacity allows it, and so does any start while
// this host drains: the record becomes that host's,
// restoring from the snapshot, and the call answers 202 relocating. The
// other host's reconciler drives the restore; a second start there joins
// it. A sandbox relocated within Config.RelocateGuard is not moved again
// (it answers 503 capacity as without relocation), so it cannot bounce
// between busy hosts.

// MetaRelocatedAt is the platform metadata key holding when the sandbox
// was last relocated (RFC 3339).
const MetaRelocatedAt = "pt_relocated_at"

// ReasonRelocating starts the reason of a sandbox being relocated.
const ReasonRelocating = "relocating"

// RelocatingError is a start answered by a relocation: Sandbox is the
// record, restoring on host To from host From.
type RelocatingError struct {
	Sandbox  sandbox.Sandbox
	From, To string
}

func (e *RelocatingError) Error() string {
	return fmt.Sprintf("sandbox %s is relocating from host %s to host %s, whose start finishes in the background; poll it, or call start again to join", e.Sandbox.ID, e.From, e.To)
}

// relocating reports whether sb is being moved here by a relocation.
func relocating(sb sandbox.Sandbox) bool {
	return sb.State == sandbox.StateRestoring && sb.RestoreSnapshotID != "" && strings.HasPrefix(sb.Reason, ReasonRelocating)
}

// relocate answers a start that admission refused with cause, or one on
// this host while it drains (cause host_draining, relocateFromDrain): it
// moves the stopped sandbox to the host with the most free memory that
// runs its class, when that is allowed and safe (a stop snapshot holds its
// disk as it stopped, and — for a busy host — it was not relocated within
// the guard; a drain is an admin's decision, not a load that may bounce).
// ok is false when it did not, and the start answers cause (a drained
// host's start goes on here).
func (s *Service) relocate(ctx context.Context, id string, cause error) (sandbox.Sandbox, *RelocatingError, bool) {
	ce, busy := errors.AsType[*CapacityError](cause)
	drain := busy && ce.Reason == ReasonHostDraining
	if !busy || !s.cfg.RelocateOnCapacity && !(drain && s.cfg.StopSnapshots) {
		return sandbox.Sandbox{}, nil, false
	}
	sb, err := s.store.GetSandbox(ctx, "", id)
	if err != nil || sb.State != sandbox.StateStopped || s.elsewhere(sb) || sb.StoppedAt == nil {
		return sandbox.Sandbox{}, nil, false
	}
	if at, err := time.Parse(time.RFC3339, sb.Metadata[MetaRelocatedAt]); err == nil && s.now().Sub(at) < s.cfg.RelocateGuard && !drain {
		return sandbox.Sandbox{}, nil, false
	}
	snaps, err := s.stopSnapshots(ctx, sb)
	if err != nil {
		return sandbox.Sandbox{}, nil, false
	}
	var snap *sandbox.Snapshot
	for i := range snaps {
		if snaps[i].State == sandbox.SnapshotReady && !snaps[i].CreatedAt.Before(sb.StoppedAt.Truncate(time.Microsecond)) {
			snap = &snaps[i]
			break
		}
	}
	if snap == nil {
		return sandbox.Sandbox{}, nil, false
	}
	to := s.relocationTarget(ctx, sb.Runtime)
	if to == "" {
		return sandbox.Sandbox{}, nil, false
	}
	from, reason := s.host.ID(), ce.Reason
	out, ok, err := s.transition(ctx, id, sandbox.StateStopped, sandbox.StateRestoring, func(x *sandbox.Sandbox) {
		x.HostID, x.RestoreSnapshotID, x.Address = to, snap.ID, ""
		x.Reason = fmt.Sprintf("%s from host %s to host %s (%s)", ReasonRelocating, from, to, reason)
		if x.Metadata == nil {
			x.Metadata = map[string]string{}
		}
		x.Metadata[MetaRelocatedAt] = s.now().Format(time.RFC3339)
	})
	if err != nil || !ok {
		return sandbox.Sandbox{}, nil, false
	}
	s.log.InfoContext(ctx, "start relocated", "sandbox", id, "from", from, "to", to, "stop_snapshot", snap.ID, "cause", reason)
	s.event(ctx, out, "relocating", map[string]any{"from_host": from, "to_host": to, "stop_snapshot_id": snap.ID, "cause": reason})
	return out, &RelocatingError{Sandbox: out, From: from, To: to}, true
}

// relocateFromDrain moves a stopped sandbox of this host elsewhere when
// this host drains (docs/operating.md: a draining host's stopped
// sandboxes start on another host); ok is false when this host does not
// drain or the move is not safe, and the start goes on here.
func (s *Service) relocateFromDrain(ctx context.Context, id string) (sandbox.Sandbox, *RelocatingError, bool) {
	if !s.cfg.StopSnapshots {
		return sandbox.Sandbox{}, nil, false
	}
	ce, ok := errors.AsType[*CapacityError](s.hostAccepts(ctx))
	if !ok || ce.Reason != ReasonHostDraining {
		return sandbox.Sandbox{}, nil, false
	}
	return s.relocate(ctx, id, ce)
}

// driveRelocation runs the restore of a sandbox relocated to this host,
// once at a time per sandbox (the reconciler and starts may all ask).
func (s *Service) driveRelocation(ctx context.Context, id string) {
	if _, busy := s.relocations.LoadOrStore(id, true); busy {
		return
	}
	defer s.relocations.Delete(id)
	s.doRestoring(ctx, id)
}

// FollowRelocations drives relocations to this host as soon as a commit
// wakes wake (the store's feed: every ptd's event appends reach it on
// PostgreSQL), and every few seconds besides, rather than only at the
// reconciler's passes. Checks are at most ten a second.
func (s *Service) FollowRelocations(ctx context.Context, wake func() <-chan struct{}) {
	if !s.RunsSandboxes() {
		return
	}
	s.bg.Loop(ctx, 5*time.Second, true, wake, func(ctx context.Context) {
		if sbs, err := s.store.SandboxesInStates(ctx, sandbox.StateRestoring); err == nil {
			for _, sb := range s.mine(sbs) {
				if relocating(sb) {
					s.bg.Go(func(ctx context.Context) { s.driveRelocation(ctx, sb.ID) })
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}, nil)
}

// relocationTarget is the active host other than this one with the most
// free memory that runs class (hostreg's capacity and the store's
// reservations); "" when there is none.
func (s *Service) relocationTarget(ctx context.Context, class string) string {
	hs, err := s.store.ListHosts(ctx)
	if err != nil {
		return ""
	}
	use, err := s.store.HostUsage(ctx, hostreg.Live...)
	if err != nil {
		return ""
	}
	best, bestFree := "", 0
	for _, h := range hs {
		var c hostreg.Capacity
		if h.ID == s.host.ID() || h.State != store.HostActive || json.Unmarshal(h.Capacity, &c) != nil || !c.Runs(class) {
			continue
		}
		if free := c.RAMMB - use[h.ID].RAMMB; best == "" || free > bestFree {
			best, bestFree = h.ID, free
		}
	}
	return best
}
