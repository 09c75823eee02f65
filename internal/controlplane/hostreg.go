package controlplane

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Reasons of a CapacityError at create: the host's registration in the
// store (docs/ARCHITECTURE.md, "Many hosts") says it takes no new
// sandboxes.
const (
	ReasonHostDraining = "host_draining"
	ReasonHostLost     = "host_lost"
)

// hostAccepts refuses a create when this process's host is registered and
// draining or lost. A host that never registered (no registry running)
// takes creates as before.
func (s *Service) hostAccepts(ctx context.Context) error {
	h, err := s.store.GetHost(ctx, s.host.ID())
	if store.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	switch h.State {
	case store.HostDraining:
		return &CapacityError{Reason: ReasonHostDraining}
	case store.HostLost:
		return &CapacityError{Reason: ReasonHostLost}
	}
	return nil
}

// HostRecords are the registered hosts, by ID.
func (s *Service) HostRecords(ctx context.Context, p Principal) ([]store.HostRecord, error) {
	return s.store.ListHosts(ctx)
}

// DrainHost sets a host draining (drain) or active again (platform admins
// only). A draining host keeps its sandboxes and takes no new ones; a lost
// host becomes active only by registering again (409).
func (s *Service) DrainHost(ctx context.Context, p Principal, id string, drain bool) (store.HostRecord, error) {
	if !p.PlatformAdmin() {
		return store.HostRecord{}, fmt.Errorf("draining hosts needs a platform admin token: %w", sandbox.ErrForbidden)
	}
	state, reason := store.HostActive, ""
	if drain {
		state, reason = store.HostDraining, "drained by an admin"
	}
	h, err := s.store.GetHost(ctx, id)
	if err != nil {
		return store.HostRecord{}, err
	}
	if h.State == state {
		return h, nil
	}
	return s.store.SetHostState(ctx, id, 0, state, reason)
}

// mine keeps the sandboxes placed on this process's host: the loops that
// drive sandboxes on their host (start-up reconcile, the reconciler,
// timers, disposal) act only on those, so ptd processes sharing a store
// never drive each other's sandboxes. A record without a host is
// everyone's (none is written so today).
func (s *Service) mine(sbs []sandbox.Sandbox) []sandbox.Sandbox {
	id := s.host.ID()
	return slices.DeleteFunc(sbs, func(sb sandbox.Sandbox) bool { return sb.HostID != "" && sb.HostID != id })
}

// lostFrom are the states a lost host's sandbox leaves, and where it goes:
// never left transitional, and honest that nothing runs. A deleting one is
// deleted (the host's sweep removes what it holds when it comes back);
// the rest are failed with reason host_lost, their disk left on the host.
// Stopped, archived and failed ones stay as they are.
var lostFrom = map[sandbox.State]sandbox.State{
	sandbox.StateCreating: sandbox.StateFailed, sandbox.StateStarting: sandbox.StateFailed,
	sandbox.StateRunning: sandbox.StateFailed, sandbox.StateStopping: sandbox.StateFailed,
	sandbox.StateArchiving: sandbox.StateFailed, sandbox.StateRestoring: sandbox.StateFailed,
	sandbox.StateDeleting: sandbox.StateDeleted,
}

// HostLost records what a host marked lost leaves behind (hostreg's
// watcher calls it): each of its sandboxes in a live or transitional
// state is failed with reason host_lost (a deleting one is deleted), then
// recovered on this host from its newest complete backup when it has one
// (recoverLost). When the host comes back, its sweep frees what failed
// sandboxes still hold there but their disks, and destroys whatever it
// holds of sandboxes recovered elsewhere (Sweep), so nothing runs that
// the store says does not. A start of a failed one boots it again from
// its disk, on its host only (startWithin).
func (s *Service) HostLost(ctx context.Context, hostID string) {
	if hostID == s.host.ID() {
		return
	}
	states := slices.Collect(func(yield func(sandbox.State) bool) {
		for st := range lostFrom {
			if !yield(st) {
				return
			}
		}
	})
	// Failed ones too: a recovery a dead watcher did not begin is begun
	// by the next.
	sbs, err := s.store.SandboxesInStates(ctx, append(states, sandbox.StateFailed)...)
	if err != nil {
		s.log.ErrorContext(ctx, "host lost", "host", hostID, "err", err)
		return
	}
	for _, sb := range sbs {
		if sb.HostID != hostID {
			continue
		}
		if sb.State == sandbox.StateFailed {
			if sb.Reason == ReasonHostLost {
				s.recoverLost(ctx, sb, hostID)
			}
			continue
		}
		to, now := lostFrom[sb.State], time.Now().UTC()
		out, ok, err := s.transition(ctx, sb.ID, sb.State, to, func(x *sandbox.Sandbox) {
			if to == sandbox.StateDeleted {
				x.DeletedAt, x.Address = &now, ""
			} else {
				x.Reason = ReasonHostLost
			}
		})
		if err != nil {
			s.log.ErrorContext(ctx, "host lost", "host", hostID, "sandbox", sb.ID, "err", err)
			continue
		}
		if ok {
			s.log.WarnContext(ctx, "sandbox of a lost host", "host", hostID, "sandbox", sb.ID, "from", sb.State, "to", to)
			if to == sandbox.StateFailed {
				s.recoverLost(ctx, out, hostID)
			}
		}
	}
}

// recoverLost moves a lost host's failed sandbox onto this host when it
// has a complete backup (docs/snapshots.md, "Backups"): in one record write
// it becomes this host's, restoring from its newest ready backup, and the
// restore writes the backup's disk here and boots it (doRestoreSnapshot);
// last_start then says which backup came back. Without a backup, or
// without an object store, it stays failed with reason host_lost.
func (s *Service) recoverLost(ctx context.Context, sb sandbox.Sandbox, lostHost string) {
	if s.cfg.Objects == nil || !s.RunsSandboxes() {
		return
	}
	bks, err := s.store.ListSnapshots(ctx, store.SnapshotFilter{OrgID: sb.OrgID, SandboxID: sb.ID,
		Kind: sandbox.KindBackup, State: sandbox.SnapshotReady})
	if err != nil || len(bks) == 0 {
		return
	}
	self := s.host.ID()
	_, ok, err := s.transition(ctx, sb.ID, sandbox.StateFailed, sandbox.StateRestoring, func(x *sandbox.Sandbox) {
		x.HostID, x.RestoreSnapshotID, x.Address = self, bks[0].ID, ""
		x.Reason = "host " + lostHost + " was lost"
	})
	if err != nil || !ok {
		return
	}
	s.log.WarnContext(ctx, "recovering a lost host's sandbox from its backup", "host", lostHost, "sandbox", sb.ID, "backup", bks[0].ID)
	s.bg.Go(func(ctx context.Context) { s.doRestoreSnapshot(ctx, sb.ID) })
}

// elsewhere reports whether sb's disk and processes are another host's
// (its record names one): this host must not start or free them.
func (s *Service) elsewhere(sb sandbox.Sandbox) bool {
	return sb.HostID != "" && sb.HostID != s.host.ID()
}
