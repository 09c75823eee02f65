package controlplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// MemorySnapshotError answers a memory snapshot the sandbox's runtime
// class cannot take on this host (runc without CRIU >= 4.1).
type MemorySnapshotError struct {
	Class, Reason string
}

// Error implements error.
func (e *MemorySnapshotError) Error() string {
	return fmt.Sprintf("runtime class %s cannot snapshot memory on this host (%s); snapshot with memory: false for the disk only", e.Class, e.Reason)
}

// Unwrap makes errors.Is(err, sandbox.ErrConflict) hold.
func (e *MemorySnapshotError) Unwrap() error { return sandbox.ErrConflict }

// SnapshotRequest is a snapshot call.
type SnapshotRequest struct {
	Name string
	// Memory: nil takes memory where the sandbox's class can (and it
	// runs); true insists (MemorySnapshotError when it cannot); false
	// copies the disk only.
	Memory *bool
	// StoppedMemory (stop snapshots only, never from the API) takes, of a
	// stopped sandbox, the checkpoint image its stop kept on this host,
	// when it kept one.
	StoppedMemory bool
}

func (s *Service) snapshotter() (Snapshotter, error) {
	sn, ok := s.host.(Snapshotter)
	if !ok {
		return nil, fmt.Errorf("snapshots: this host cannot take them: %w", sandbox.ErrUnavailable)
	}
	return sn, nil
}

// Snapshot takes a snapshot of a running or stopped sandbox: its disk,
// and its memory where the class can. The sandbox keeps running; it is
// paused no longer than the copy needs. It answers once the snapshot is
// ready (milliseconds for the disk, a checkpoint's time with memory).
func (s *Service) snapshotCall(ctx context.Context, p Principal, id string, r SnapshotRequest) (sandbox.Snapshot, error) {
	if r.Name != "" && !nameRE.MatchString(r.Name) {
		return sandbox.Snapshot{}, &sandbox.FieldError{Field: "name", Reason: "must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"}
	}
	return s.snapshot(ctx, p, id, r, sandbox.PrefixSnapshot)
}

func (s *Service) snapshot(ctx context.Context, p Principal, id string, r SnapshotRequest, prefix string) (sandbox.Snapshot, error) {
	snapper, err := s.snapshotter()
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	sb, err := s.Get(ctx, p, id, false)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	unlock := s.locks.Lock(id)
	defer unlock()
	// Re-read under the lock: a stop or start may have just finished.
	if sb, err = s.Get(ctx, p, id, false); err != nil {
		return sandbox.Snapshot{}, err
	}
	if sb.State != sandbox.StateRunning && sb.State != sandbox.StateStopped {
		return sandbox.Snapshot{}, &StateError{State: sb.State, Want: "running or stopped"}
	}
	canMem, why := memorySnapshots(snapper, sb)
	memory := canMem && sb.State == sandbox.StateRunning
	switch {
	case r.Memory == nil:
	case !*r.Memory:
		memory = false
	case !canMem:
		return sandbox.Snapshot{}, &MemorySnapshotError{Class: sb.Runtime, Reason: why}
	case sb.State != sandbox.StateRunning:
		return sandbox.Snapshot{}, &StateError{State: sb.State, Want: "running for a memory snapshot"}
	}
	now := s.now()
	snap := sandbox.Snapshot{
		ID: sandbox.NewID(prefix), OrgID: sb.OrgID, SandboxID: sb.ID, Name: r.Name,
		Kind: sandbox.KindSnapshot, State: sandbox.SnapshotCreating, Memory: memory, HostID: s.host.ID(),
		Source: sandbox.SnapshotSource{Template: sb.Template, TemplateVersionID: sb.TemplateVersionID,
			CPU: sb.CPU, RAMMB: sb.RAMMB, DiskGB: sb.DiskGB, Runtime: sb.Runtime},
		CreatedAt: now, UpdatedAt: now,
	}
	if prefix == sandbox.PrefixBackup {
		snap.Kind = sandbox.KindBackup
	}
	// The record exists before any file: after a crash the reconciler
	// finds it creating and removes what was made.
	if err := s.store.CreateSnapshot(ctx, snap); err != nil {
		return sandbox.Snapshot{}, err
	}
	t0 := time.Now()
	if r.StoppedMemory && sb.State == sandbox.StateStopped {
		memory = true
	}
	files, err := snapper.Snapshot(ctx, id, snap.ID, sb.Runtime, memory)
	if err != nil {
		s.store.DeleteSnapshot(context.WithoutCancel(ctx), snap.ID)
		return sandbox.Snapshot{}, fmt.Errorf("snapshot of %s: %w", id, err)
	}
	snap.DiskImage, snap.MemoryImage, snap.SizeBytes = files.DiskImage, files.MemoryImage, files.SizeBytes
	snap.Memory = memory && files.MemoryImage != ""
	memory = snap.Memory
	if prefix == sandbox.PrefixSnapshot {
		snap.State = sandbox.SnapshotReady
	}
	out, err := s.store.UpdateSnapshot(ctx, snap)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	s.event(ctx, sb, "snapshot_created", map[string]any{"snapshot_id": snap.ID, "memory": memory, "took_ms": time.Since(t0).Milliseconds()})
	s.log.InfoContext(ctx, "snapshot taken", "sandbox", id, "snapshot", snap.ID, "memory", memory, "took", time.Since(t0))
	return out, nil
}

// ListSnapshots returns a sandbox's snapshots (or backups), newest first, or,
// with an empty id, those of every sandbox p sees.
// Snapshots of a deleted sandbox stay listed until deleted.
func (s *Service) ListSnapshots(ctx context.Context, p Principal, id string, kind sandbox.SnapshotKind) ([]sandbox.Snapshot, error) {
	if id != "" {
		if _, err := s.Get(ctx, p, id, true); err != nil {
			return nil, err
		}
	}
	l, err := s.store.ListSnapshots(ctx, store.SnapshotFilter{OrgID: p.OrgID, SandboxID: id, Kind: kind})
	if err != nil {
		return nil, err
	}
	out := l[:0]
	for _, snap := range l {
		// Across the org, a scoped principal sees the snapshots of the
		// sandboxes it sees (as GetSnapshot decides).
		if id == "" && (p.SandboxID != "" || p.ProjectID != "") {
			if _, err := s.GetSnapshot(ctx, p, snap.ID); err != nil {
				continue
			}
		}
		s.fillProgress(&snap)
		out = append(out, snap)
	}
	return out, nil
}

// GetSnapshot returns a snapshot or backup of p's org. A sandbox-scoped
// principal sees only snapshots of the sandboxes it sees.
func (s *Service) GetSnapshot(ctx context.Context, p Principal, snapID string) (sandbox.Snapshot, error) {
	if !sandbox.ValidID(sandbox.PrefixSnapshot, snapID) && !sandbox.ValidID(sandbox.PrefixBackup, snapID) {
		return sandbox.Snapshot{}, fmt.Errorf("snapshot %q: %w", snapID, sandbox.ErrNotFound)
	}
	snap, err := s.store.GetSnapshot(ctx, p.OrgID, snapID)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	// Scoped principals (sandbox or project tokens) see the snapshots of
	// the sandboxes they see; a purged sandbox's snapshots stay visible to
	// its org only.
	if _, err := s.Get(ctx, p, snap.SandboxID, true); err != nil {
		if _, gerr := s.store.GetSandbox(ctx, p.OrgID, snap.SandboxID); gerr == nil || p.SandboxID != "" {
			return sandbox.Snapshot{}, fmt.Errorf("snapshot %q: %w", snapID, sandbox.ErrNotFound)
		}
	}
	s.fillProgress(&snap)
	return snap, nil
}

func (s *Service) fillProgress(snap *sandbox.Snapshot) {
	s.progressMu.Lock()
	defer s.progressMu.Unlock()
	if pr, ok := s.progress[snap.ID]; ok {
		snap.Progress = &pr
	}
}

// DeleteSnapshot removes a snapshot's files (a backup's manifest and
// descriptor; shared chunks stay for chunk GC) and its record. A snapshot
// a restore in place is using answers a conflict.
func (s *Service) DeleteSnapshot(ctx context.Context, p Principal, snapID string) error {
	snap, err := s.GetSnapshot(ctx, p, snapID)
	if err != nil {
		return err
	}
	busy, err := s.store.SandboxesInStates(ctx, sandbox.StateRestoring, sandbox.StateCreating)
	if err != nil {
		return err
	}
	for _, sb := range busy {
		if sb.RestoreSnapshotID == snapID || sb.SourceSnapshotID == snapID && sb.State == sandbox.StateCreating {
			return fmt.Errorf("snapshot %s is in use by %s (%s): %w", snapID, sb.ID, sb.State, sandbox.ErrConflict)
		}
	}
	switch snap.Kind {
	case sandbox.KindBackup:
		if snap.State == sandbox.SnapshotCreating {
			return fmt.Errorf("backup %s is still uploading: %w", snapID, sandbox.ErrConflict)
		}
		if err := s.deleteBackupObjects(ctx, snap); err != nil {
			return err
		}
	default:
		if snap.HostID == s.host.ID() {
			snapper, err := s.snapshotter()
			if err != nil {
				return err
			}
			if err := snapper.RemoveSnapshot(ctx, snapID); err != nil {
				return err
			}
		}
	}
	if err := s.store.DeleteSnapshot(ctx, snapID); err != nil {
		return err
	}
	if snap.Name == StopSnapshotName {
		s.forgetStopSnapshot(ctx, snap)
	}
	return nil
}

// Restore rolls a running, stopped or failed sandbox back to one of its
// snapshots in place: its disk, and its memory when the snapshot has it.
// The sandbox goes through restoring to running; the work happens in the
// background (wait with WaitFor(…, StateRunning, …)). If ptd dies midway
// the reconciler runs the restore again: the disk is swapped in one rename
// and every step can be repeated.
func (s *Service) restore(ctx context.Context, p Principal, id, snapID string) (sandbox.Sandbox, error) {
	if _, err := s.snapshotter(); err != nil {
		return sandbox.Sandbox{}, err
	}
	if snapID == "" {
		return sandbox.Sandbox{}, &sandbox.FieldError{Field: "snapshot_id", Reason: "is required"}
	}
	for {
		sb, err := s.Get(ctx, p, id, false)
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		snap, err := s.GetSnapshot(ctx, p, snapID)
		if err != nil || snap.SandboxID != id || snap.Kind != sandbox.KindSnapshot {
			return sandbox.Sandbox{}, fmt.Errorf("snapshot %q of sandbox %s: %w", snapID, id, &sandbox.NotFoundFieldError{Name: "snapshot_id"})
		}
		if snap.State != sandbox.SnapshotReady || snap.HostID != s.host.ID() {
			return sandbox.Sandbox{}, fmt.Errorf("snapshot %s is %s: %w", snapID, snap.State, sandbox.ErrConflict)
		}
		switch sb.State {
		case sandbox.StateRunning, sandbox.StateStopped, sandbox.StateFailed:
		default:
			return sb, &StateError{State: sb.State, Want: "running, stopped or failed"}
		}
		sb.State, sb.Reason, sb.RestoreSnapshotID = sandbox.StateRestoring, "", snapID
		sb, err = s.update(ctx, sb)
		if isConflict(err) && !errors.As(err, new(*StateError)) {
			continue
		}
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		s.log.InfoContext(ctx, "sandbox restoring from snapshot", "sandbox", id, "snapshot", snapID)
		s.bg.GoFor(ctx, func(ctx context.Context) { s.doRestoreSnapshot(ctx, id) })
		return sb, nil
	}
}

// doRestoring drives a restoring sandbox: a restore in place from a
// snapshot, or an archive coming back.
func (s *Service) doRestoring(ctx context.Context, id string) {
	if sb, err := s.store.GetSandbox(ctx, "", id); err == nil && sb.RestoreSnapshotID != "" {
		s.doRestoreSnapshot(ctx, id)
		return
	}
	s.doUnarchive(ctx, id)
}

// restoreDisk puts snap's disk in place of sb's: a local snapshot's by the
// host's atomic swap, a backup's (a recovery from a lost host, hostreg.go)
// written from the object store where this host keeps sb's disk.
func (s *Service) restoreDisk(ctx context.Context, sb sandbox.Sandbox, snap sandbox.Snapshot) error {
	if snap.Kind == sandbox.KindBackup {
		return s.restoreBackupDisk(ctx, sb, snap)
	}
	snapper, err := s.snapshotter()
	if err != nil {
		return err
	}
	return snapper.RestoreDisk(ctx, sb.ID, snap.ID)
}

// doRestoreSnapshot swaps the snapshot's disk in and starts the sandbox on
// it, from the snapshot's memory when it has some. A failure leaves the
// sandbox failed with the reason (start it to boot whatever disk it has:
// the old one or the snapshot's, never a mix).
func (s *Service) doRestoreSnapshot(ctx context.Context, id string) {
	unlock := s.locks.Lock(id)
	defer unlock()
	sb, err := s.store.GetSandbox(ctx, "", id)
	if err != nil || sb.State != sandbox.StateRestoring || sb.RestoreSnapshotID == "" {
		return
	}
	log := s.log.With("sandbox", id, "snapshot", sb.RestoreSnapshotID)
	fail := func(err error) {
		log.ErrorContext(ctx, "restore from snapshot failed", "err", err)
		s.markFailed(ctx, id, sandbox.StateRestoring, "restore from snapshot "+sb.RestoreSnapshotID+": "+err.Error(), func(sb *sandbox.Sandbox) {
			sb.RestoreSnapshotID = ""
		})
	}
	snap, err := s.store.GetSnapshot(ctx, sb.OrgID, sb.RestoreSnapshotID)
	if err != nil {
		fail(err)
		return
	}
	s.forgetAgent(id)
	if err := s.restoreDisk(ctx, sb, snap); err != nil {
		if ctx.Err() == nil {
			fail(err)
		}
		return
	}
	// A stop snapshot's memory becomes the sandbox's checkpoint here, which
	// the start below restores (stopmem.go).
	memFailure := s.importStopMemory(ctx, sb, snap)
	if ctx.Err() != nil {
		return
	}
	v, err := s.store.GetTemplateVersion(ctx, sb.TemplateVersionID)
	if err != nil {
		fail(err)
		return
	}
	rootfs, err := s.templateRootFS(ctx, v)
	if err != nil {
		if ctx.Err() == nil {
			fail(err)
		}
		return
	}
	spec := s.startSpec(sb, rootfs)
	if snap.Memory && snap.MemoryImage != "" && snap.Source.Runtime == sb.Runtime {
		spec.Clone = &CloneSpec{MemoryImage: snap.MemoryImage, SourceAgentToken: sb.AgentToken}
	}
	pctx, done, booting := s.bootSlot(ctx, id, sandbox.StateRestoring)
	if !booting {
		return // deleted while queued, or shutting down
	}
	defer done()
	inst, err := s.host.Start(pctx, spec)
	if err == nil {
		err = s.initAgent(pctx, sb, inst)
	}
	if err != nil {
		if ctx.Err() == nil {
			fail(err)
		}
		return
	}
	now := s.now()
	ls := &sandbox.LastStart{Restore: sandbox.RestoreDiskOnly, At: now, Reason: "restored from disk snapshot " + snap.ID}
	if snap.Kind == sandbox.KindBackup {
		ls.Reason = fmt.Sprintf("restored from backup %s, taken %s", snap.ID, snap.CreatedAt.Format(time.RFC3339))
		if sb.Reason != "" {
			ls.Reason += ": " + sb.Reason
		}
	}
	memWanted := spec.Clone != nil || stopMemoryApplies(sb, snap)
	switch {
	case inst.MemoryRestored && snap.Kind == sandbox.KindBackup:
		ls.Restore, ls.RAMRestored = sandbox.RestoreMemory, true
		ls.Reason = strings.Replace(ls.Reason, "restored from backup", "restored with its memory from backup", 1)
	case inst.MemoryRestored:
		ls.Restore, ls.RAMRestored, ls.Reason = sandbox.RestoreMemory, true, ""
	case spec.Clone != nil:
		ls.Reason = "the snapshot's memory could not be restored; booted from its disk"
	case memWanted:
		why := memFailure
		if why == "" {
			why = inst.RestoreFailure
		}
		ls.Reason += "; its memory was not restored (" + why + "): booted from its disk"
	}
	_, ok, err := s.transition(ctx, id, sandbox.StateRestoring, sandbox.StateRunning, func(sb *sandbox.Sandbox) {
		sb.Address, sb.LastStart, sb.LastActivityAt, sb.StoppedAt = inst.Address, ls, &now, nil
		sb.RestoreSnapshotID, sb.Reason = "", ""
		if !inst.MemoryRestored {
			sb.Live = s.headroom(*sb)
		}
	})
	if err != nil || !ok {
		return
	}
	s.forgetAgent(id)
	s.watchOOM(sb)
	s.event(ctx, sb, "restored_from_snapshot", map[string]any{"snapshot_id": snap.ID, "memory": inst.MemoryRestored})
	if memWanted && !inst.MemoryRestored {
		s.event(ctx, sb, "start_ram_not_restored", ls)
	}
	log.InfoContext(ctx, "sandbox restored from snapshot", "memory", inst.MemoryRestored)
}

// resolveSource fills a create from a snapshot (from_snapshot) or a backup
// (from_backup) with the source's template, size and runtime, and returns
// the snapshot record the sandbox is made from (nil for a plain create).
// A backup this host has never seen is read from the object store.
func (s *Service) resolveSource(ctx context.Context, p Principal, r *CreateRequest) (*sandbox.Snapshot, error) {
	if r.FromSnapshot == "" && r.FromBackup == "" {
		return nil, nil
	}
	if r.FromSnapshot != "" && r.FromBackup != "" {
		return nil, &sandbox.FieldError{Field: "from_snapshot", Reason: "give from_snapshot or from_backup, not both"}
	}
	var snap sandbox.Snapshot
	var err error
	if r.FromSnapshot != "" {
		if !sandbox.ValidID(sandbox.PrefixSnapshot, r.FromSnapshot) {
			return nil, fmt.Errorf("snapshot %q: %w", r.FromSnapshot, &sandbox.NotFoundFieldError{Name: "from_snapshot"})
		}
		if snap, err = s.GetSnapshot(ctx, p, r.FromSnapshot); err != nil {
			return nil, fmt.Errorf("snapshot %q: %w", r.FromSnapshot, &sandbox.NotFoundFieldError{Name: "from_snapshot"})
		}
		if snap.HostID != s.host.ID() {
			return nil, fmt.Errorf("snapshot %s is on host %s: %w", snap.ID, snap.HostID, sandbox.ErrUnavailable)
		}
	} else {
		if snap, err = s.backupForClone(ctx, p, r.FromBackup); err != nil {
			return nil, err
		}
	}
	if snap.State != sandbox.SnapshotReady {
		return nil, fmt.Errorf("%s %s is %s: %w", snap.Kind, snap.ID, snap.State, sandbox.ErrConflict)
	}
	src := snap.Source
	if r.Template != "" && r.Template != src.Template {
		return nil, &sandbox.FieldError{Field: "template", Reason: fmt.Sprintf("must be empty or %q (the snapshot's)", src.Template)}
	}
	if r.Runtime != "" && r.Runtime != src.Runtime {
		return nil, &sandbox.FieldError{Field: "runtime", Reason: fmt.Sprintf("must be empty or %q (the snapshot's)", src.Runtime)}
	}
	if r.DiskGB != nil && *r.DiskGB < src.DiskGB {
		return nil, &sandbox.FieldError{Field: "disk_gb", Reason: fmt.Sprintf("must be at least %d (the snapshot's)", src.DiskGB)}
	}
	if snap.Memory && (r.CPU != nil && *r.CPU != src.CPU || r.RAMMB != nil && *r.RAMMB != src.RAMMB) {
		return nil, &sandbox.FieldError{Field: "ram_mb", Reason: "a snapshot with memory keeps its cpu and ram_mb; leave them out"}
	}
	r.Template, r.Runtime = src.Template, src.Runtime
	if r.CPU == nil {
		r.CPU = &src.CPU
	}
	if r.RAMMB == nil {
		r.RAMMB = &src.RAMMB
	}
	if r.DiskGB == nil {
		r.DiskGB = &src.DiskGB
	}
	if r.Env == nil {
		if from, err := s.store.GetSandbox(ctx, snap.OrgID, snap.SandboxID); err == nil {
			r.Env = from.Env
		}
	}
	return &snap, nil
}

// cloneSpec tells the host how to start a sandbox made from a snapshot or
// backup: the snapshot's disk, its memory where it has some and the class
// can restore it, and a new identity either way. A backup's disk is
// brought back from the object store first (again after a crash).
func (s *Service) cloneSpec(ctx context.Context, sb sandbox.Sandbox) (*CloneSpec, error) {
	if sb.SourceSnapshotID == "" {
		return nil, nil
	}
	snap, err := s.store.GetSnapshot(ctx, sb.OrgID, sb.SourceSnapshotID)
	if err != nil {
		return nil, err
	}
	if snap.Kind == sandbox.KindBackup {
		if err := s.restoreBackupDisk(ctx, sb, snap); err != nil {
			return nil, err
		}
		return &CloneSpec{NewIdentity: true}, nil
	}
	c := &CloneSpec{SnapshotID: snap.ID, NewIdentity: true}
	if snap.Memory && snap.MemoryImage != "" && snap.Source.Runtime == sb.Runtime {
		if from, err := s.store.GetSandbox(ctx, "", snap.SandboxID); err == nil {
			c.MemoryImage, c.SourceAgentToken = snap.MemoryImage, from.AgentToken
		}
	}
	return c, nil
}

// cloneStart is what the first start of a clone or fork brought back
// (nil for a sandbox made from a template).
func cloneStart(c *CloneSpec, inst Instance, now time.Time) *sandbox.LastStart {
	if c == nil {
		return nil
	}
	if inst.MemoryRestored {
		return &sandbox.LastStart{Restore: sandbox.RestoreMemory, RAMRestored: true, At: now}
	}
	ls := &sandbox.LastStart{Restore: sandbox.RestoreDiskOnly, At: now, Reason: "booted on a copy of the snapshot's disk"}
	if c.MemoryImage != "" {
		ls.Reason = "the snapshot's memory could not be restored; " + ls.Reason
	}
	return ls
}

// ForkRequest is a fork call.
type ForkRequest struct {
	// Count is how many copies to make (1 to MaxForks).
	Count int
	// NoParent makes the copies top-level sandboxes instead of children of
	// the source (a sandbox-scoped caller's copies are always its children).
	NoParent bool
	// Metadata is set on every copy over the source's metadata: who made
	// a copy is not always who made the source (the MCP server labels its
	// copies with the caller, docs/mcp.md).
	Metadata map[string]string
	// Name names the copy (only with Count 1); empty leaves it unnamed.
	Name string
}

// MaxForks bounds one fork call.
const MaxForks = 20

// ForkResult is what a fork made.
type ForkResult struct {
	SourceID string
	// Memory is true when the copies start from the source's memory; when
	// false, MemoryReason says why they cold-boot on copies of its disk.
	Memory       bool
	MemoryReason string
	Sandboxes    []sandbox.Sandbox
}

// Fork makes Count new sandboxes from the current state of a running one:
// one snapshot (memory where the class can checkpoint while running, else
// the disk), then Count clones of it, each with its own identity
// (hostname, machine-id, entropy), address and tokens. The copies are
// created at once and start in the background; the internal snapshot is
// removed once none of them needs it.
func (s *Service) fork(ctx context.Context, p Principal, id string, r ForkRequest) (ForkResult, error) {
	if r.Count < 1 || r.Count > MaxForks {
		return ForkResult{}, &sandbox.FieldError{Field: "count", Reason: fmt.Sprintf("must be between 1 and %d", MaxForks)}
	}
	if r.Name != "" && r.Count != 1 {
		return ForkResult{}, &sandbox.FieldError{Field: "name", Reason: "names one copy: give it only with count 1"}
	}
	src, err := s.Get(ctx, p, id, false)
	if err != nil {
		return ForkResult{}, err
	}
	if src.State != sandbox.StateRunning {
		return ForkResult{}, &StateError{State: src.State}
	}
	// The copies' metadata, checked before any snapshot is taken.
	md := userMetadata(src.Metadata)
	if md == nil && len(r.Metadata) > 0 {
		md = map[string]string{}
	}
	maps.Copy(md, r.Metadata)
	if err := validateUserMetadata(md); err != nil {
		return ForkResult{}, err
	}
	parent := id
	if r.NoParent || p.SandboxID != "" {
		// A sandbox-scoped caller's copies are its own children (Create
		// makes them so).
		parent = ""
	}
	// A fork the quotas refuse even one copy of takes no snapshot: a
	// refused request changes nothing. (Each copy's Create checks again
	// under the quota lock.)
	if err := s.tenancy.CheckQuota(ctx, p.OrgID, src.CPU, src.RAMMB); err != nil {
		return ForkResult{}, err
	}
	if parent != "" {
		if err := s.checkTreeQuota(ctx, p.OrgID, parent, src.CPU, src.RAMMB); err != nil {
			return ForkResult{}, err
		}
	}
	snapper, err := s.snapshotter()
	if err != nil {
		return ForkResult{}, err
	}
	res := ForkResult{SourceID: id}
	canMem, why := memorySnapshots(snapper, src)
	if !canMem {
		res.MemoryReason = fmt.Sprintf("runtime class %s cannot checkpoint this sandbox on this host (%s): the forks boot on copies of the disk", src.Runtime, why)
	}
	snap, err := s.snapshot(ctx, p, id, SnapshotRequest{Name: "fork", Memory: &canMem}, sandbox.PrefixSnapshot)
	if err != nil {
		return ForkResult{}, err
	}
	res.Memory = snap.Memory
	var made []string
	for range r.Count {
		sb, err := s.Create(ctx, p, CreateRequest{
			FromSnapshot: snap.ID, ParentID: parent, Metadata: maps.Clone(md), Type: src.Retention.Type,
			AutoStopMinutes: &src.Retention.AutoStopMinutes, AutoArchiveDays: &src.Retention.AutoArchiveDays,
			AutoDeleteDays: &src.Retention.AutoDeleteDays, NoAutoResume: src.NoAutoResume,
			// A copy of the machine answers the same SSH keys as the
			// original, gets as many GPUs and keeps its egress policy (a
			// fork must not be a way out of a blocked network).
			SSHKeys: src.SSHKeys, GPUs: src.GPUs, GPUModel: src.GPUModel, Network: src.Network, Name: r.Name,
		})
		if err != nil {
			if len(made) == 0 {
				s.DeleteSnapshot(context.WithoutCancel(ctx), Principal{OrgID: p.OrgID}, snap.ID)
				return ForkResult{}, err
			}
			res.MemoryReason += fmt.Sprintf(" (made %d of %d: %v)", len(made), r.Count, err)
			break
		}
		made = append(made, sb.ID)
		res.Sandboxes = append(res.Sandboxes, sb)
	}
	s.bg.Go(func(ctx context.Context) { s.dropWhenProvisioned(ctx, snap, made) })
	s.log.InfoContext(ctx, "sandbox forked", "sandbox", id, "count", len(made), "memory", snap.Memory)
	return res, nil
}

// dropWhenProvisioned deletes a fork's internal snapshot once none of its
// copies is still being created from it.
func (s *Service) dropWhenProvisioned(ctx context.Context, snap sandbox.Snapshot, ids []string) {
	for _, id := range ids {
		for {
			sb, _, err := s.WaitFor(ctx, Principal{OrgID: snap.OrgID}, id, sandbox.StateRunning, s.cfg.MaxWait)
			if err != nil || sb.State != sandbox.StateCreating {
				break
			}
			if ctx.Err() != nil {
				return // the snapshot stays; the next start re-provisions from it
			}
		}
	}
	if err := s.DeleteSnapshot(ctx, Principal{OrgID: snap.OrgID}, snap.ID); err != nil {
		s.log.WarnContext(ctx, "drop fork snapshot", "snapshot", snap.ID, "err", err)
	}
}

// reconcileSnapshots cleans up after a crash: a local snapshot left
// creating is removed (its caller got an error), and a backup left
// creating is uploaded again.
func (s *Service) reconcileSnapshots(ctx context.Context) {
	l, err := s.store.ListSnapshots(ctx, store.SnapshotFilter{State: sandbox.SnapshotCreating})
	if err != nil {
		s.log.WarnContext(ctx, "reconcile snapshots", "err", err)
		return
	}
	snapper, _ := s.snapshotter()
	for _, snap := range l {
		if snap.HostID != s.host.ID() {
			continue
		}
		if snap.Kind == sandbox.KindBackup {
			s.bg.GoFor(ctx, func(ctx context.Context) { s.doBackup(ctx, snap.ID) })
			continue
		}
		if snapper != nil {
			snapper.RemoveSnapshot(ctx, snap.ID)
		}
		s.store.DeleteSnapshot(ctx, snap.ID)
	}
}

// hasCompleteBackup reports whether the sandbox has a complete backup:
// like a complete archive, it extends a platform deletion's retention
// (90 days, docs/lifecycle.md). Only ready backups count.
func (s *Service) hasCompleteBackup(sb sandbox.Sandbox) bool {
	l, err := s.store.ListSnapshots(s.bg.Context(), store.SnapshotFilter{OrgID: sb.OrgID, SandboxID: sb.ID,
		Kind: sandbox.KindBackup, State: sandbox.SnapshotReady})
	return err == nil && len(l) > 0
}

// snapshotObjects lists the objects a sandbox's snapshots own, in their
// recorded buckets, for the deletion ledger of its final disposal: a backup
// (the snapshot whose disk is in the object store) owns its snapshot
// manifest (the disk image's archive manifest, kind snapshot_manifest) and
// its sidecar (the descriptor other hosts read to find and clone it, kind
// snapshot_sidecar; immutable, one per backup). A snapshot that is not a
// backup lives on its host only and owns no object. A stop snapshot with
// memory also owns its memory image files' manifests and their index
// (stopmem.go). Chunks are shared and never listed.
func (s *Service) snapshotObjects(ctx context.Context, sb sandbox.Sandbox) []store.ObjectRef {
	l, err := s.store.ListSnapshots(ctx, store.SnapshotFilter{OrgID: sb.OrgID, SandboxID: sb.ID, Kind: sandbox.KindBackup})
	if err != nil {
		s.log.WarnContext(ctx, "disposal: list backups", "sandbox", sb.ID, "err", err)
		return nil
	}
	var refs []store.ObjectRef
	for _, b := range l {
		if b.ManifestKey == "" {
			continue
		}
		refs = append(refs,
			store.ObjectRef{Bucket: b.Bucket, Key: b.ManifestKey, Kind: "snapshot_manifest"},
			store.ObjectRef{Bucket: b.Bucket, Key: BackupDescriptorKey(b.ID), Kind: "snapshot_sidecar"})
		refs = append(refs, s.memoryObjects(ctx, b)...)
	}
	return refs
}

// dropSnapshots removes a purged sandbox's snapshot files on this host
// and every snapshot record of it (its backups' objects are queued in
// the ledger entry).
func (s *Service) dropSnapshots(ctx context.Context, sb sandbox.Sandbox) {
	l, err := s.store.ListSnapshots(ctx, store.SnapshotFilter{OrgID: sb.OrgID, SandboxID: sb.ID})
	if err != nil {
		s.log.WarnContext(ctx, "disposal: list snapshots", "sandbox", sb.ID, "err", err)
		return
	}
	snapper, _ := s.snapshotter()
	for _, snap := range l {
		if snap.Kind == sandbox.KindSnapshot && snap.HostID == s.host.ID() && snapper != nil {
			if err := snapper.RemoveSnapshot(ctx, snap.ID); err != nil {
				s.log.WarnContext(ctx, "disposal: remove snapshot", "snapshot", snap.ID, "err", err)
				continue
			}
		}
		if err := s.store.DeleteSnapshot(ctx, snap.ID); err != nil {
			s.log.WarnContext(ctx, "disposal: snapshot record", "snapshot", snap.ID, "err", err)
		}
	}
}
