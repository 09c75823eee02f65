package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/platinum-dev/platinum/internal/archive"
	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Backups are snapshots whose disk goes off the host: the snapshot's disk
// image is streamed to the object store as archive chunks (content
// addressed and shared with archives and other backups, so a second backup
// of a mostly unchanged disk uploads little), then the archive manifest,
// then a descriptor at backups/<bkp_…>.json. The descriptor is what makes a
// backup restorable on any host sharing the object store, even one whose
// own store has never heard of it: `from_backup: bkp_…` reads it there. A
// backup is complete (state ready) only once both are written.

// backupDescriptorPrefix is where backup descriptors live in the archive
// bucket (archive owns chunks/ and manifests/).
const backupDescriptorPrefix = "backups/"

// BackupDescriptorKey returns where backup id's descriptor is stored.
func BackupDescriptorKey(id string) string { return backupDescriptorPrefix + id + ".json" }

// backupDescriptor is a backup as other hosts read it from the object
// store.
type backupDescriptor struct {
	Version     int                    `json:"version"`
	ID          string                 `json:"id"`
	OrgID       string                 `json:"org_id"`
	SandboxID   string                 `json:"sandbox_id"`
	Name        string                 `json:"name,omitempty"`
	Source      sandbox.SnapshotSource `json:"source"`
	Bucket      string                 `json:"bucket"`
	ManifestKey string                 `json:"manifest_key"`
	SizeBytes   int64                  `json:"size_bytes"`
	CreatedAt   time.Time              `json:"created_at"`
}

// Backup takes a disk snapshot of a running or stopped sandbox and uploads
// it to the object store in the background. It returns the backup record
// (state creating); poll GetSnapshot until it is ready (or failed).
func (s *Service) Backup(ctx context.Context, p Principal, id, name string) (sandbox.Snapshot, error) {
	if s.cfg.Objects == nil {
		return sandbox.Snapshot{}, fmt.Errorf("backup: no object store configured: %w", sandbox.ErrUnavailable)
	}
	if name != "" && !nameRE.MatchString(name) {
		return sandbox.Snapshot{}, &sandbox.FieldError{Field: "name", Reason: "must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"}
	}
	no := false
	snap, err := s.snapshot(ctx, p, id, SnapshotRequest{Name: name, Memory: &no}, sandbox.PrefixBackup)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	s.bg.GoFor(ctx, func(ctx context.Context) { s.doBackup(ctx, snap.ID) })
	return snap, nil
}

// doBackup uploads a backup's local disk copy, writes its manifest and
// descriptor, and removes the local copy. A failure marks it failed; a
// crash leaves it creating for the reconciler, which runs this again
// (chunks already uploaded are reused).
func (s *Service) doBackup(ctx context.Context, id string) {
	unlock := s.locks.Lock(id)
	defer unlock()
	snap, err := s.store.GetSnapshot(ctx, "", id)
	if err != nil || snap.State != sandbox.SnapshotCreating || snap.Kind != sandbox.KindBackup {
		return
	}
	log := s.log.With("backup", id, "sandbox", snap.SandboxID)
	snapper, err := s.snapshotter()
	if err != nil {
		return
	}
	defer snapper.RemoveSnapshot(context.WithoutCancel(ctx), id)
	fail := func(err error) {
		log.ErrorContext(ctx, "backup failed", "err", err)
		snap.State, snap.Reason = sandbox.SnapshotFailed, err.Error()
		if _, err := s.store.UpdateSnapshot(context.WithoutCancel(ctx), snap); err != nil {
			log.ErrorContext(ctx, "record backup failure", "err", err)
		}
	}
	_, derr := os.Stat(snap.DiskImage)
	_, merr := os.Stat(snap.MemoryImage)
	if derr != nil || snap.Memory && merr != nil {
		// The local copy is gone (a crash before it was recorded): take it
		// again if the sandbox still has a disk (and, for a stop snapshot,
		// the memory its stop kept, if it still has it).
		files, err := snapper.Snapshot(ctx, snap.SandboxID, id, snap.Source.Runtime, snap.Memory)
		if err != nil {
			fail(fmt.Errorf("copy the disk again: %w", err))
			return
		}
		snap.DiskImage, snap.MemoryImage, snap.Memory = files.DiskImage, files.MemoryImage, files.MemoryImage != ""
	}
	if s.cfg.Objects == nil {
		fail(errors.New("no object store configured"))
		return
	}
	if err := s.cfg.Objects.EnsureBucket(ctx, s.cfg.ArchiveBucket); err != nil {
		fail(err)
		return
	}
	start := time.Now()
	var memUploaded int64
	if snap.Memory {
		snap.Bucket = s.cfg.ArchiveBucket // for deleteMemoryObjects, should the backup fail
		// A stop snapshot's memory (stopmem.go): without it the backup is
		// still the disk as it stopped.
		if memUploaded, err = s.uploadMemory(ctx, snap, snap.MemoryImage); err != nil {
			if ctx.Err() != nil {
				return
			}
			log.WarnContext(ctx, "backup of the memory image failed; the backup holds the disk only", "err", err)
			snap.Memory = false
		}
	}
	defer s.setProgress(id, nil)
	res, err := archive.WriteFile(ctx, s.cfg.Objects, s.cfg.ArchiveBucket, snap.DiskImage, archive.Options{
		ID: id,
		Progress: func(done, total int64) {
			s.setProgress(id, &sandbox.Progress{Op: "backup", DoneBytes: done, TotalBytes: total})
		},
	})
	if errors.Is(err, sandbox.ErrAlreadyExists) {
		// A retry after the manifest was written: reuse it.
		var m archive.Manifest
		if m, err = archive.ReadManifest(ctx, s.cfg.Objects, s.cfg.ArchiveBucket, archive.ManifestKey(id)); err == nil {
			res = archive.Result{Key: m.Key(), Manifest: m}
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			fail(err)
		}
		return
	}
	snap.Bucket, snap.ManifestKey, snap.SizeBytes = s.cfg.ArchiveBucket, res.Key, res.Manifest.Size
	d := backupDescriptor{Version: 1, ID: id, OrgID: snap.OrgID, SandboxID: snap.SandboxID, Name: snap.Name,
		Source: snap.Source, Bucket: snap.Bucket, ManifestKey: snap.ManifestKey, SizeBytes: snap.SizeBytes, CreatedAt: snap.CreatedAt}
	b, err := json.Marshal(d)
	if err == nil {
		err = s.cfg.Objects.Put(ctx, s.cfg.ArchiveBucket, BackupDescriptorKey(id), bytes.NewReader(b), int64(len(b)))
	}
	if err != nil {
		if ctx.Err() == nil {
			fail(err)
		}
		return
	}
	snap.State, snap.DiskImage, snap.MemoryImage, snap.HostID = sandbox.SnapshotReady, "", "", ""
	if _, err := s.store.UpdateSnapshot(ctx, snap); err != nil {
		log.ErrorContext(ctx, "record backup", "err", err)
		return
	}
	took := time.Since(start)
	log.InfoContext(ctx, "backup complete", "manifest", res.Key, "bytes", res.Manifest.Size, "uploaded_bytes", res.BytesUploaded,
		"chunks_uploaded", res.ChunksUploaded, "chunks_reused", res.ChunksReused, "memory", snap.Memory, "memory_uploaded_bytes", memUploaded, "took", took)
	if sb, err := s.store.GetSandbox(ctx, "", snap.SandboxID); err == nil {
		s.event(ctx, sb, "backup_complete", map[string]any{"backup_id": id, "size_bytes": res.Manifest.Size,
			"uploaded_bytes": res.BytesUploaded, "chunks_uploaded": res.ChunksUploaded, "chunks_reused": res.ChunksReused,
			"memory": snap.Memory, "memory_uploaded_bytes": memUploaded, "took_ms": took.Milliseconds()})
	}
}

// backupForClone finds backup id for a create: in this host's store, or
// else by its descriptor in the object store (a backup taken on another
// host), which is then recorded here. Another org's backup is not found.
func (s *Service) backupForClone(ctx context.Context, p Principal, id string) (sandbox.Snapshot, error) {
	notFound := fmt.Errorf("backup %q: %w", id, &sandbox.NotFoundFieldError{Name: "from_backup"})
	if !sandbox.ValidID(sandbox.PrefixBackup, id) {
		return sandbox.Snapshot{}, notFound
	}
	if snap, err := s.GetSnapshot(ctx, p, id); err == nil {
		return snap, nil
	} else if !errors.Is(err, sandbox.ErrNotFound) {
		return sandbox.Snapshot{}, err
	}
	if s.cfg.Objects == nil {
		return sandbox.Snapshot{}, notFound
	}
	if _, err := s.store.GetSnapshot(ctx, "", id); err == nil {
		return sandbox.Snapshot{}, notFound // known here, in another org
	}
	rc, err := s.cfg.Objects.Get(ctx, s.cfg.ArchiveBucket, BackupDescriptorKey(id))
	if errors.Is(err, objstore.ErrNotFound) {
		return sandbox.Snapshot{}, notFound
	}
	if err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("backup %s: %w", id, err)
	}
	b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	rc.Close()
	if err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("backup %s: %w", id, err)
	}
	var d backupDescriptor
	if err := json.Unmarshal(b, &d); err != nil || d.ID != id || d.Version != 1 {
		return sandbox.Snapshot{}, fmt.Errorf("backup %s: unreadable descriptor: %w", id, archive.ErrCorrupt)
	}
	if d.OrgID != p.OrgID || p.SandboxID != "" {
		return sandbox.Snapshot{}, notFound
	}
	snap := sandbox.Snapshot{ID: id, OrgID: d.OrgID, SandboxID: d.SandboxID, Name: d.Name, Kind: sandbox.KindBackup,
		State: sandbox.SnapshotReady, Source: d.Source, Bucket: d.Bucket, ManifestKey: d.ManifestKey, SizeBytes: d.SizeBytes,
		CreatedAt: d.CreatedAt.UTC().Truncate(time.Microsecond)}
	// The template version may not exist on this host: build the slug's
	// current one instead (the disk holds the sandbox's own files).
	if _, err := s.store.GetTemplateVersion(ctx, snap.Source.TemplateVersionID); err != nil {
		snap.Source.TemplateVersionID = ""
	}
	if err := s.store.CreateSnapshot(ctx, snap); err != nil && !errors.Is(err, store.ErrConflict) {
		return sandbox.Snapshot{}, err
	}
	s.log.InfoContext(ctx, "backup found in the object store", "backup", id, "org", d.OrgID, "source_sandbox", d.SandboxID)
	return snap, nil
}

// restoreBackupDisk writes a backup's disk image where sb's disk goes,
// unless it is there already (a retried provisioning).
func (s *Service) restoreBackupDisk(ctx context.Context, sb sandbox.Sandbox, snap sandbox.Snapshot) error {
	path := s.host.DiskImagePath(sb.ID)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if s.cfg.Objects == nil {
		return fmt.Errorf("backup %s: no object store configured: %w", snap.ID, sandbox.ErrUnavailable)
	}
	start := time.Now()
	defer s.setProgress(sb.ID, nil)
	_, err := archive.Restore(ctx, s.cfg.Objects, snap.Bucket, snap.ManifestKey, path, archive.RestoreOptions{
		Progress: func(done, total int64) {
			s.setProgress(sb.ID, &sandbox.Progress{Op: "restore", DoneBytes: done, TotalBytes: total})
		},
	})
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("backup %s: %w", snap.ID, err)
	}
	s.log.InfoContext(ctx, "sandbox disk restored from backup", "sandbox", sb.ID, "backup", snap.ID, "bytes", snap.SizeBytes, "took", time.Since(start))
	return nil
}

// deleteBackupObjects removes a backup's descriptor, then its manifest
// (never its chunks: they may be shared; chunk GC removes the rest).
func (s *Service) deleteBackupObjects(ctx context.Context, snap sandbox.Snapshot) error {
	if err := s.deleteMemoryObjects(ctx, snap); err != nil {
		return err
	}
	if s.cfg.Objects == nil || snap.ManifestKey == "" {
		return nil
	}
	if err := s.cfg.Objects.Delete(ctx, snap.Bucket, BackupDescriptorKey(snap.ID)); err != nil && !errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("backup %s: %w", snap.ID, err)
	}
	if err := archive.DeleteManifest(ctx, s.cfg.Objects, snap.Bucket, snap.ManifestKey); err != nil && !errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("backup %s: %w", snap.ID, err)
	}
	return nil
}
