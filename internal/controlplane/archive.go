package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/platinum-dev/platinum/internal/archive"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Archive moves a stopped sandbox's disk to the object store as
// content-addressed chunks and frees the local disk. Only a stopped
// sandbox can be archived; archiving an archived (or archiving) one
// returns it unchanged. The work happens in the background; wait with
// WaitFor(…, StateArchived, …).
func (s *Service) archive(ctx context.Context, p Principal, id string) (sandbox.Sandbox, error) {
	ctx = context.WithoutCancel(ctx) // as stop: the caller's wait never cuts the call in half
	for {
		sb, err := s.Get(ctx, p, id, false)
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		// Stopped only (docs/archive.md): an archived or archiving sandbox
		// is a 409 naming its state too (a retry with the same
		// Idempotency-Key still gets the first answer).
		if sb.State != sandbox.StateStopped {
			return sb, &StateError{State: sb.State, Want: "stopped (stop it first)"}
		}
		if s.cfg.Objects == nil {
			return sb, fmt.Errorf("archive: no object store configured: %w", sandbox.ErrUnavailable)
		}
		sb.State, sb.Reason = sandbox.StateArchiving, ""
		sb, err = s.update(ctx, sb)
		if err != nil {
			if isConflict(err) {
				continue
			}
			return sandbox.Sandbox{}, err
		}
		s.bg.GoFor(ctx, func(ctx context.Context) { s.doArchive(ctx, id) })
		return sb, nil
	}
}

// doArchive uploads the disk, records where it went, then frees the
// local disk. A failure (object store down, crash) leaves the sandbox
// stopped with its local disk intact and the reason recorded; retrying
// works, and chunks already uploaded are reused.
func (s *Service) doArchive(ctx context.Context, id string) {
	sb, unlock, ok := s.lockIn(ctx, id, sandbox.StateArchiving)
	if !ok {
		return
	}
	defer unlock()
	log := s.log.With("sandbox", id)
	fail := func(err error) {
		log.ErrorContext(ctx, "archive failed; the local disk is intact", "err", err)
		s.transition(context.WithoutCancel(ctx), id, sandbox.StateArchiving, sandbox.StateStopped, func(sb *sandbox.Sandbox) {
			sb.Reason = "archive failed: " + err.Error() + " (the local disk is intact; archive again to retry)"
		})
	}
	if s.cfg.Objects == nil {
		fail(fmt.Errorf("no object store configured"))
		return
	}
	path, err := s.host.DiskImage(ctx, id)
	if err != nil {
		fail(err)
		return
	}
	if err := s.cfg.Objects.EnsureBucket(ctx, s.cfg.ArchiveBucket); err != nil {
		fail(err)
		return
	}
	start := time.Now()
	lastLog := start
	defer s.setProgress(id, nil)
	res, err := archive.WriteFile(ctx, s.cfg.Objects, s.cfg.ArchiveBucket, path, archive.Options{
		Progress: func(done, total int64) {
			s.setProgress(id, &sandbox.Progress{Op: "archive", DoneBytes: done, TotalBytes: total})
			if time.Since(lastLog) > time.Second {
				lastLog = time.Now()
				log.InfoContext(ctx, "archiving", "done_bytes", done, "total_bytes", total)
			}
		},
	})
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down: the reconciler retries after a restart
		}
		fail(err)
		return
	}
	// Cleared before the state settles, so no reader sees "archived" with
	// the upload's last progress.
	s.setProgress(id, nil)
	old := sb.Archive
	now := s.now()
	_, ok, err = s.transition(ctx, id, sandbox.StateArchiving, sandbox.StateArchived, func(sb *sandbox.Sandbox) {
		sb.Archive = &sandbox.ArchiveRef{Bucket: s.cfg.ArchiveBucket, ManifestKey: res.Key,
			SizeBytes: res.Manifest.Size, CreatedAt: now, Complete: true}
	})
	if err != nil || !ok {
		return
	}
	log.InfoContext(ctx, "sandbox archived", "manifest", res.Key, "bytes", res.Manifest.Size, "uploaded_bytes", res.BytesUploaded,
		"chunks_uploaded", res.ChunksUploaded, "chunks_reused", res.ChunksReused, "took", time.Since(start))
	if err := s.host.RemoveDisk(ctx, id); err != nil {
		log.WarnContext(ctx, "free local disk after archive (the reconciler retries)", "err", err)
	}
	// The previous archive of this sandbox is superseded; its chunks stay
	// for whoever shares them, and chunk GC removes the rest.
	if old != nil && old.ManifestKey != res.Key {
		if err := archive.DeleteManifest(ctx, s.cfg.Objects, old.Bucket, old.ManifestKey); err != nil {
			log.WarnContext(ctx, "delete superseded archive manifest", "err", err)
		}
	}
}

// doUnarchive brings the disk back from the object store, then starts
// the sandbox. A failure leaves it archived with the reason.
func (s *Service) doUnarchive(ctx context.Context, id string) {
	sb, unlock, ok := s.lockIn(ctx, id, sandbox.StateRestoring)
	if !ok {
		return
	}
	log := s.log.With("sandbox", id)
	err := fmt.Errorf("no archive recorded")
	if ref := sb.Archive; ref != nil && s.cfg.Objects != nil {
		start := time.Now()
		_, err = archive.Restore(ctx, s.cfg.Objects, ref.Bucket, ref.ManifestKey, s.host.DiskImagePath(id), archive.RestoreOptions{
			Progress: func(done, total int64) {
				s.setProgress(id, &sandbox.Progress{Op: "restore", DoneBytes: done, TotalBytes: total})
			},
		})
		s.setProgress(id, nil)
		if err == nil {
			log.InfoContext(ctx, "sandbox disk restored from archive", "bytes", ref.SizeBytes, "took", time.Since(start))
		}
	}
	if err != nil {
		unlock()
		if ctx.Err() != nil {
			return
		}
		log.ErrorContext(ctx, "unarchive failed", "err", err)
		s.transition(ctx, id, sandbox.StateRestoring, sandbox.StateArchived, func(sb *sandbox.Sandbox) {
			sb.Reason = "restore from archive failed: " + err.Error() + " (start again to retry)"
		})
		return
	}
	_, ok, err = s.transition(ctx, id, sandbox.StateRestoring, sandbox.StateStarting, nil)
	unlock()
	if err == nil && ok {
		s.doStart(ctx, id)
	}
}

// isConflict reports a lost compare-and-swap, worth a re-read and a retry.
// A transition the table refuses is a conflict too (409), but retrying it
// would spin: the state it was refused in is the current one.
func isConflict(err error) bool {
	return errors.Is(err, store.ErrConflict) && !errors.As(err, new(*StateError))
}

// setProgress records (or, with nil, clears) a long operation's progress.
func (s *Service) setProgress(id string, p *sandbox.Progress) {
	s.progressMu.Lock()
	defer s.progressMu.Unlock()
	if p == nil {
		delete(s.progress, id)
	} else {
		s.progress[id] = *p
	}
}
