package archive

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/objstore"
)

// DefaultGCGrace is how old an unreferenced chunk must be before GC deletes
// it. It must exceed the longest archive Write: a chunk uploaded (or
// touched) by a Write whose manifest is not stored yet is unreferenced but
// younger than this.
const DefaultGCGrace = 24 * time.Hour

// GCOptions tune GC. The zero value gives the defaults.
type GCOptions struct {
	// Grace overrides DefaultGCGrace. It must be positive: a zero value
	// means the default, never "delete everything unreferenced now".
	Grace time.Duration
	// DryRun counts what would be deleted without deleting.
	DryRun bool
	// Now returns the current time (default time.Now); tests replace it.
	Now func() time.Time
}

// GCResult is what GC found and did.
type GCResult struct {
	// Manifests is how many manifests were read.
	Manifests int
	// Referenced is how many distinct chunks they reference.
	Referenced int
	// Chunks is how many chunk objects were listed.
	Chunks int
	// Missing is how many referenced chunks do not exist: archives that
	// cannot be restored. It should be 0.
	Missing int
	// Young counts unreferenced chunks kept because they are within the
	// grace period (possibly part of a Write in flight).
	Young int
	// Deleted and DeletedBytes count the unreferenced chunks removed (or,
	// with DryRun, that would be).
	Deleted      int
	DeletedBytes int64
}

// GC deletes the chunks in bucket that no manifest references and that are
// older than the grace period. It reads every manifest first and deletes
// nothing if any cannot be read or parsed (a manifest it could not
// understand may reference anything). Before deleting a chunk it checks its
// age again, so a chunk that a concurrent Write reused (and touched) since
// the listing survives.
//
// The one race left: a Write that reuses a chunk in the instant between
// GC's final check of that chunk and its deletion. The Write then completes
// with a manifest whose restore fails with objstore.ErrNotFound for that
// chunk. Running GC rarely (it is only about space) keeps this remote.
func GC(ctx context.Context, store objstore.Store, bucket string, opts GCOptions) (GCResult, error) {
	if opts.Grace <= 0 {
		opts.Grace = DefaultGCGrace
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var res GCResult

	referenced := map[string]bool{} // chunk hash → seen in the chunk listing
	for info, err := range store.List(ctx, bucket, ManifestPrefix) {
		if err != nil {
			return res, fmt.Errorf("gc: list manifests: %w", err)
		}
		if checkManifestKey(info.Key) != nil {
			return res, fmt.Errorf("gc: unexpected object %s among manifests: %w", info.Key, ErrCorrupt)
		}
		m, err := ReadManifest(ctx, store, bucket, info.Key)
		if errors.Is(err, objstore.ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return res, fmt.Errorf("gc: %w", err)
		}
		res.Manifests++
		for _, h := range m.Chunks {
			if h != "" {
				referenced[h] = false
			}
		}
	}
	res.Referenced = len(referenced)

	cutoff := opts.Now().Add(-opts.Grace)
	for info, err := range store.List(ctx, bucket, ChunkPrefix) {
		if err != nil {
			return res, fmt.Errorf("gc: list chunks: %w", err)
		}
		h := strings.TrimPrefix(info.Key, ChunkPrefix)
		if !isHash(h) {
			continue // not ours
		}
		res.Chunks++
		if _, ok := referenced[h]; ok {
			referenced[h] = true
			continue
		}
		if !info.ModTime.Before(cutoff) {
			res.Young++
			continue
		}
		// Look again right before deleting: a Write may have touched it.
		fresh, err := store.Stat(ctx, bucket, info.Key)
		if errors.Is(err, objstore.ErrNotFound) {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("gc: %w", err)
		}
		if !fresh.ModTime.Before(cutoff) {
			res.Young++
			continue
		}
		if !opts.DryRun {
			if err := store.Delete(ctx, bucket, info.Key); err != nil {
				return res, fmt.Errorf("gc: %w", err)
			}
		}
		res.Deleted++
		res.DeletedBytes += fresh.Size
	}
	for _, found := range referenced {
		if !found {
			res.Missing++
		}
	}
	return res, nil
}
