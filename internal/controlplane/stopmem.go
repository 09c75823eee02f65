package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/platinum-dev/platinum/internal/archive"
	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// A stop snapshot's memory (docs/ARCHITECTURE.md, "Stop snapshots"): when
// the stop checkpointed the sandbox (gvisor; runc only with a working
// CRIU), the stop snapshot links that image and its backup uploads each of
// its files as an archive of its own (chunked, compressed, deduplicated
// like the disk), then an index at backups/<bkp_…>.memory.json naming
// them, before the disk and the descriptor. A backup is ready only once
// all of them are written, and a ready one has Memory only when its index
// was, so a half-uploaded image is never used; a memory upload that fails
// leaves a disk-only stop snapshot. A start from
// it on another host writes the files into the sandbox's checkpoint image
// there (hostapi.CheckpointImporter), which its start restores, or boots
// cold from the disk and says why.

// memoryIndexKey is where backup id's memory index is stored.
func memoryIndexKey(id string) string { return backupDescriptorPrefix + id + ".memory.json" }

// memoryIndex names the archives of a backup's memory image files.
type memoryIndex struct {
	Version int          `json:"version"`
	Class   string       `json:"class"`
	Files   []memoryFile `json:"files"`
}

type memoryFile struct {
	Name        string `json:"name"`
	ManifestKey string `json:"manifest_key"`
	Size        int64  `json:"size"`
}

// uploadMemory archives every file of the image in dir and writes the
// index last. It returns the bytes uploaded (compressed).
func (s *Service) uploadMemory(ctx context.Context, snap sandbox.Snapshot, dir string) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	if len(entries) == 0 {
		return 0, errors.New("the memory image is empty")
	}
	idx := memoryIndex{Version: 1, Class: snap.Source.Runtime}
	var up int64
	for i, e := range entries {
		if !e.Type().IsRegular() {
			return up, fmt.Errorf("memory image file %s is not a regular file", e.Name())
		}
		path, id := filepath.Join(dir, e.Name()), snap.ID+".mem"+strconv.Itoa(i)
		res, err := archive.WriteFile(ctx, s.cfg.Objects, s.cfg.ArchiveBucket, path, archive.Options{ID: id})
		if errors.Is(err, sandbox.ErrAlreadyExists) {
			// A retry after this file's manifest was written: rewrite it,
			// the file may differ (a new link of the image).
			if err = archive.DeleteManifest(ctx, s.cfg.Objects, s.cfg.ArchiveBucket, archive.ManifestKey(id)); err == nil {
				res, err = archive.WriteFile(ctx, s.cfg.Objects, s.cfg.ArchiveBucket, path, archive.Options{ID: id})
			}
		}
		if err != nil {
			return up, fmt.Errorf("memory image file %s: %w", e.Name(), err)
		}
		up += res.BytesUploaded
		idx.Files = append(idx.Files, memoryFile{Name: e.Name(), ManifestKey: res.Key, Size: res.Manifest.Size})
	}
	b, err := json.Marshal(idx)
	if err != nil {
		return up, err
	}
	return up, s.cfg.Objects.Put(ctx, s.cfg.ArchiveBucket, memoryIndexKey(snap.ID), bytes.NewReader(b), int64(len(b)))
}

// readMemoryIndex reads backup snap's memory index.
func (s *Service) readMemoryIndex(ctx context.Context, snap sandbox.Snapshot) (memoryIndex, error) {
	var idx memoryIndex
	rc, err := s.cfg.Objects.Get(ctx, snap.Bucket, memoryIndexKey(snap.ID))
	if err != nil {
		return idx, err
	}
	b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	rc.Close()
	if err != nil {
		return idx, err
	}
	if err := json.Unmarshal(b, &idx); err != nil || idx.Version != 1 || len(idx.Files) == 0 {
		return idx, fmt.Errorf("unreadable memory index: %w", archive.ErrCorrupt)
	}
	for _, f := range idx.Files {
		if f.Name == "" || f.Name != filepath.Base(f.Name) || f.Name == "." || f.Name == ".." {
			return idx, fmt.Errorf("memory index names file %q: %w", f.Name, archive.ErrCorrupt)
		}
	}
	return idx, nil
}

// stopMemoryApplies reports whether backup snap holds the memory of the
// stop sb is in: a stop snapshot with memory, taken at or after that stop.
// A lost host's running sandbox recovered from an older stop snapshot
// boots its disk: that memory is of an earlier stop.
func stopMemoryApplies(sb sandbox.Sandbox, snap sandbox.Snapshot) bool {
	return snap.Kind == sandbox.KindBackup && snap.Memory && snap.Name == StopSnapshotName &&
		sandbox.StopSnapshotRef{ID: snap.ID, At: snap.CreatedAt}.Current(sb.StoppedAt)
}

// importStopMemory gives sb, restoring here from backup snap's disk, the
// backup's memory image as its checkpoint when it applies
// (stopMemoryApplies), so its start restores the processes. It returns
// why not ("" when it did, or when it does not apply): the caller then
// boots cold from the disk.
func (s *Service) importStopMemory(ctx context.Context, sb sandbox.Sandbox, snap sandbox.Snapshot) string {
	if !stopMemoryApplies(sb, snap) {
		return ""
	}
	imp, ok := s.host.(CheckpointImporter)
	switch {
	case !ok:
		return "this host cannot take a memory image from another host"
	case s.cfg.Objects == nil:
		return "no object store configured"
	case snap.Source.Runtime != sb.Runtime:
		return fmt.Sprintf("the memory image is of runtime class %s, the sandbox runs %s", snap.Source.Runtime, sb.Runtime)
	case snap.Source.CPU != sb.CPU || snap.Source.RAMMB != sb.RAMMB:
		return fmt.Sprintf("the memory image is of %g cpu / %d MB, the sandbox is now %g / %d", snap.Source.CPU, snap.Source.RAMMB, sb.CPU, sb.RAMMB)
	}
	if ok, why := s.memoryRestorable(sb.Runtime); !ok {
		return why
	}
	t0 := time.Now()
	idx, err := s.readMemoryIndex(ctx, snap)
	if err == nil {
		err = imp.ImportCheckpoint(ctx, sb.ID, idx.Class, func(ctx context.Context, dir string) error {
			for _, f := range idx.Files {
				if _, err := archive.Restore(ctx, s.cfg.Objects, snap.Bucket, f.ManifestKey, filepath.Join(dir, f.Name), archive.RestoreOptions{}); err != nil {
					return fmt.Errorf("%s: %w", f.Name, err)
				}
			}
			return nil
		})
	}
	if err != nil {
		s.log.WarnContext(ctx, "stop snapshot memory not fetched", "sandbox", sb.ID, "backup", snap.ID, "err", err)
		return "the stop snapshot's memory image could not be fetched: " + err.Error()
	}
	s.log.InfoContext(ctx, "stop snapshot memory fetched", "sandbox", sb.ID, "backup", snap.ID, "took", time.Since(t0))
	return ""
}

// memoryRestorable reports whether this host's class can restore a memory
// image and, when not, why.
func (s *Service) memoryRestorable(class string) (bool, string) {
	sn, ok := s.host.(Snapshotter)
	if !ok {
		return false, "this host cannot restore memory"
	}
	ok, why := sn.MemorySnapshots(class)
	if !ok {
		return false, fmt.Sprintf("runtime class %s cannot restore memory on this host (%s)", class, why)
	}
	return true, ""
}

// deleteMemoryObjects removes backup snap's memory index, then the
// manifests it names (their chunks stay for chunk GC).
func (s *Service) deleteMemoryObjects(ctx context.Context, snap sandbox.Snapshot) error {
	if !snap.Memory || s.cfg.Objects == nil || snap.Bucket == "" {
		return nil
	}
	idx, err := s.readMemoryIndex(ctx, snap)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil
	}
	if err != nil && !errors.Is(err, archive.ErrCorrupt) {
		return fmt.Errorf("backup %s memory: %w", snap.ID, err)
	}
	for _, f := range idx.Files {
		if err := archive.DeleteManifest(ctx, s.cfg.Objects, snap.Bucket, f.ManifestKey); err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("backup %s memory: %w", snap.ID, err)
		}
	}
	// The index goes last, so a retry still finds the manifests.
	if err := s.cfg.Objects.Delete(ctx, snap.Bucket, memoryIndexKey(snap.ID)); err != nil && !errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("backup %s memory: %w", snap.ID, err)
	}
	return nil
}

// memoryObjects lists backup snap's memory objects for the deletion
// ledger: each file's manifest, then the index.
func (s *Service) memoryObjects(ctx context.Context, snap sandbox.Snapshot) []store.ObjectRef {
	if !snap.Memory || s.cfg.Objects == nil || snap.Bucket == "" {
		return nil
	}
	idx, err := s.readMemoryIndex(ctx, snap)
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		s.log.WarnContext(ctx, "disposal: read a memory index", "backup", snap.ID, "err", err)
	}
	var refs []store.ObjectRef
	for _, f := range idx.Files {
		refs = append(refs, store.ObjectRef{Bucket: snap.Bucket, Key: f.ManifestKey, Kind: "snapshot_manifest"})
	}
	if err == nil {
		refs = append(refs, store.ObjectRef{Bucket: snap.Bucket, Key: memoryIndexKey(snap.ID), Kind: "snapshot_sidecar"})
	}
	return refs
}
