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
// state is failed with reason host_lost (a deleting one is deleted). When
// the host comes back, its sweep frees what those sandboxes still hold
// there but their disks, so nothing runs that the store says does not; a
// start boots one again from its disk. Recovery on another host is not
// built (docs/ARCHITECTURE.md, "Many hosts").
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
	sbs, err := s.store.SandboxesInStates(ctx, states...)
	if err != nil {
		s.log.ErrorContext(ctx, "host lost", "host", hostID, "err", err)
		return
	}
	for _, sb := range sbs {
		if sb.HostID != hostID {
			continue
		}
		to, now := lostFrom[sb.State], time.Now().UTC()
		_, ok, err := s.transition(ctx, sb.ID, sb.State, to, func(x *sandbox.Sandbox) {
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
		}
	}
}
