package controlplane

import (
	"context"
	"errors"
	"time"

	"github.com/platinum-dev/platinum/internal/archive"
	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// retentionOf is how long a deleted record is kept before final disposal
// (docs/ARCHITECTURE.md, "Final disposal"): 30 days; a sandbox the
// platform deleted (DeletedBy, recorded at the deletion: a TTL expiry,
// pool upkeep, platform_deleted) with a completed archive (or backup)
// keeps that recovery data 90 days instead. An incomplete backup does not
// qualify, and a customer-configured timer (auto_delete_days) is the
// user's. Records from before DeletedBy count as the platform's only when
// their deleted reason says platform_deleted.
func (s *Service) retentionOf(sb sandbox.Sandbox) time.Duration {
	if causeOf(sb) == sandbox.DeletedByPlatform && (sb.Archive != nil && sb.Archive.Complete || s.hasCompleteBackup(sb)) {
		return s.cfg.PlatformRecoveryRetention
	}
	return s.cfg.DeletedRetention
}

// causeOf is who caused a deleted sandbox's deletion: its recorded
// DeletedBy, or for a record from before that field, the platform only
// when its reason says platform_deleted.
func causeOf(sb sandbox.Sandbox) string {
	switch {
	case sb.DeletedBy != "":
		return sb.DeletedBy
	case sb.Reason == "platform_deleted":
		return sandbox.DeletedByPlatform
	}
	return sandbox.DeletedByUser
}

// ownObjects lists the objects a sandbox owns in their recorded buckets:
// its archive manifest, the immutable descriptor of the archive's current
// generation (a new archive writes a new one and deletes the superseded
// one); its backups' snapshot manifests and sidecars join in
// snapshotObjects.
// Content-addressed chunks are shared, so they are never listed: chunk GC
// removes the unreferenced ones.
func ownObjects(sb sandbox.Sandbox) []store.ObjectRef {
	var refs []store.ObjectRef
	if a := sb.Archive; a != nil && a.ManifestKey != "" {
		refs = append(refs, store.ObjectRef{Bucket: a.Bucket, Key: a.ManifestKey, Kind: "archive_manifest"})
	}
	return refs
}

// recordedBucket is the bucket its snapshots' objects were recorded in,
// for the ledger's snapshot bucket; empty (unknown) when none was
// recorded: it is never inferred from the current storage configuration.
func recordedBucket(refs []store.ObjectRef) string {
	for _, r := range refs {
		if r.Bucket != "" {
			return r.Bucket
		}
	}
	return ""
}

// dispose purges deleted records past their retention and carries out
// queued object deletions. A purged-row count is not proof that storage
// cleanup finished: object deletion is asynchronous and retried.
func (s *Service) dispose(ctx context.Context, now time.Time) {
	deleted, err := s.store.SandboxesInStates(ctx, sandbox.StateDeleted)
	if err != nil {
		s.log.WarnContext(ctx, "disposal", "err", err)
		return
	}
	deleted = s.mine(deleted)
	for _, sb := range deleted {
		if sb.DeletedAt == nil || now.Sub(*sb.DeletedAt) < s.retentionOf(sb) {
			continue
		}
		snaps := s.snapshotObjects(ctx, sb)
		l := store.LedgerEntry{DeletedReason: sb.Reason, DeletedBy: causeOf(sb), Objects: append(ownObjects(sb), snaps...), SnapshotBucket: recordedBucket(snaps)}
		if err := s.store.PurgeSandbox(ctx, sb.ID, l); err != nil && !errors.Is(err, store.ErrNotFound) {
			s.log.WarnContext(ctx, "purge", "sandbox", sb.ID, "err", err)
			continue
		}
		s.dropSnapshots(ctx, sb)
		s.log.InfoContext(ctx, "sandbox record disposed", "sandbox", sb.ID, "reason", sb.Reason, "objects", len(l.Objects))
	}
	if s.cfg.Objects == nil {
		return
	}
	s.collectChunks(ctx, now)
	dels, err := s.store.ObjectDeletions(ctx, 100)
	if err != nil {
		s.log.WarnContext(ctx, "object deletions", "err", err)
		return
	}
	for _, d := range dels {
		err := s.cfg.Objects.Delete(ctx, d.Ref.Bucket, d.Ref.Key)
		if errors.Is(err, objstore.ErrNotFound) {
			err = nil
		}
		if ferr := s.store.FinishObjectDeletion(ctx, d.ID, err); ferr != nil {
			s.log.WarnContext(ctx, "object deletion", "err", ferr)
		}
	}
}

// collectChunks runs the archive chunk GC at most every ChunkGCInterval:
// it deletes chunks no manifest references once they are older than the
// GC grace period, so disposing of one sandbox's manifests frees what only
// it used and never breaks another's archive.
func (s *Service) collectChunks(ctx context.Context, now time.Time) {
	if s.cfg.ChunkGCInterval <= 0 || now.Sub(s.lastChunkGC) < s.cfg.ChunkGCInterval {
		return
	}
	s.lastChunkGC = now
	s.collectTemplateArchives(ctx, now)
	res, err := archive.GC(ctx, s.cfg.Objects, s.cfg.ArchiveBucket, archive.GCOptions{})
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		s.log.WarnContext(ctx, "chunk gc", "err", err)
		return
	}
	if res.Deleted > 0 {
		s.log.InfoContext(ctx, "chunk gc", "deleted", res.Deleted, "deleted_bytes", res.DeletedBytes, "referenced", res.Referenced)
	}
}
