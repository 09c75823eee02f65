package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Stop snapshots (docs/ARCHITECTURE.md, "Many hosts"): on a platform of
// several hosts, a stop also writes the stopped disk to the object store
// as a backup named StopSnapshotName, so that another host can start the
// sandbox when its own is lost. A sandbox keeps one: the next replaces it.

// StopSnapshotName names a stop snapshot among a sandbox's backups. The
// API refuses the colon in the names it is given, so no user backup has
// it.
const StopSnapshotName = "pt:stop"

// takeStopSnapshot backs up a stopped sandbox's disk when another live
// host could start it from there, then deletes its older stop snapshots.
// It runs in the background after a stop; a start or delete meanwhile
// ends it (the snapshot needs the sandbox stopped).
func (s *Service) takeStopSnapshot(ctx context.Context, id string) {
	if !s.cfg.StopSnapshots || s.cfg.Objects == nil || s.aloneOnStore(ctx) {
		return
	}
	sb, err := s.store.GetSandbox(ctx, "", id)
	if err != nil || sb.State != sandbox.StateStopped {
		return
	}
	old, err := s.stopSnapshots(ctx, sb)
	if err != nil {
		return
	}
	no := false
	snap, err := s.snapshot(ctx, Principal{OrgID: sb.OrgID}, id, SnapshotRequest{Name: StopSnapshotName, Memory: &no, StoppedMemory: true}, sandbox.PrefixBackup)
	if err != nil {
		s.log.WarnContext(ctx, "stop snapshot", "sandbox", id, "err", err)
		return
	}
	s.doBackup(ctx, snap.ID)
	got, err := s.store.GetSnapshot(ctx, "", snap.ID)
	if err != nil || got.State != sandbox.SnapshotReady {
		return // the older one stays the newest complete
	}
	// The record says where the sandbox may start (StartsOn) while it
	// stays stopped; a start meanwhile moved on and needs no note.
	if _, _, err := s.transition(ctx, id, sandbox.StateStopped, sandbox.StateStopped, func(x *sandbox.Sandbox) {
		x.StopSnapshot = &sandbox.StopSnapshotRef{ID: got.ID, At: got.CreatedAt}
	}); err != nil {
		s.log.WarnContext(ctx, "record the stop snapshot", "sandbox", id, "backup", got.ID, "err", err)
	}
	for _, o := range old {
		if err := s.DeleteSnapshot(ctx, Principal{OrgID: sb.OrgID}, o.ID); err != nil {
			s.log.WarnContext(ctx, "delete a replaced stop snapshot", "sandbox", id, "backup", o.ID, "err", err)
		}
	}
}

// stopSnapshots are sb's stop snapshots, newest first.
func (s *Service) stopSnapshots(ctx context.Context, sb sandbox.Sandbox) ([]sandbox.Snapshot, error) {
	bks, err := s.store.ListSnapshots(ctx, store.SnapshotFilter{OrgID: sb.OrgID, SandboxID: sb.ID, Kind: sandbox.KindBackup})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(bks, func(b sandbox.Snapshot) bool { return b.Name != StopSnapshotName }), nil
}

// forgetStopSnapshot clears the record's note of stop snapshot snap once
// snap is deleted (replaced, or by a caller), so StartsOn never counts on
// a copy that is gone.
func (s *Service) forgetStopSnapshot(ctx context.Context, snap sandbox.Snapshot) {
	_, err := s.store.ModifySandbox(ctx, snap.OrgID, snap.SandboxID, func(sb *sandbox.Sandbox) error {
		if sb.StopSnapshot == nil || sb.StopSnapshot.ID != snap.ID {
			return errUnchanged
		}
		sb.StopSnapshot = nil
		return nil
	})
	if err != nil && !errors.Is(err, errUnchanged) && !store.IsNotFound(err) {
		s.log.WarnContext(ctx, "forget a deleted stop snapshot", "sandbox", snap.SandboxID, "backup", snap.ID, "err", err)
	}
}

// errUnchanged aborts a ModifySandbox that has nothing to write.
var errUnchanged = errors.New("unchanged")

// currentStopSnapshot is sb's newest complete stop snapshot that holds
// its disk as it stopped (taken at or after the stop), nil when none does.
func (s *Service) currentStopSnapshot(ctx context.Context, sb sandbox.Sandbox) (*sandbox.Snapshot, error) {
	snaps, err := s.stopSnapshots(ctx, sb)
	if err != nil {
		return nil, err
	}
	for i := range snaps {
		ref := sandbox.StopSnapshotRef{ID: snaps[i].ID, At: snaps[i].CreatedAt}
		if snaps[i].State == sandbox.SnapshotReady && ref.Current(sb.StoppedAt) {
			return &snaps[i], nil
		}
	}
	return nil, nil
}

// aloneOnStore reports whether no other host that is not lost shares the
// store: then no other could start this host's sandboxes.
func (s *Service) aloneOnStore(ctx context.Context) bool {
	hs, err := s.store.ListHosts(ctx)
	if err != nil {
		return true
	}
	return !slices.ContainsFunc(hs, func(h store.HostRecord) bool { return h.ID != s.host.ID() && h.State != store.HostLost })
}

// startFromStopSnapshot moves a stopped sandbox of a lost host here, to
// restore from its stop snapshot when that holds the disk as it stopped
// (taken at or after its stop). ok is false when there is none, or its
// host is not lost: then its disk is only on its host.
func (s *Service) startFromStopSnapshot(ctx context.Context, sb *sandbox.Sandbox) (ok bool, err error) {
	if !s.RunsSandboxes() {
		// An api-only ptd takes no sandbox: forwarding sends such a start
		// to a host that does.
		return false, nil
	}
	h, err := s.store.GetHost(ctx, sb.HostID)
	if err != nil || h.State != store.HostLost || sb.State != sandbox.StateStopped || sb.StoppedAt == nil {
		return false, nil
	}
	snap, err := s.currentStopSnapshot(ctx, *sb)
	if err != nil || snap == nil {
		return false, err
	}
	sb.State, sb.HostID, sb.RestoreSnapshotID = sandbox.StateRestoring, s.host.ID(), snap.ID
	sb.Reason = fmt.Sprintf("host %s was lost; started from its stop snapshot", h.ID)
	return true, nil
}
