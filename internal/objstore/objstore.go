// Package objstore is the contract for Platinum's object store: the place
// archives (content-addressed chunks plus manifests) and other cold data go.
// Implementations live in subpackages (fs: a local directory, the embedded
// default; s3: any S3-compatible endpoint) and all pass the shared suite in
// objstoretest, so code above this package never depends on which one runs.
//
// Conventions every implementation follows:
//   - Buckets and keys are validated the same way everywhere (ValidBucket,
//     ValidKey), so a key that works on the local store also works on S3
//     and cannot escape a directory.
//   - A bucket must exist (EnsureBucket) before Put; the same key in two
//     buckets names two different objects.
//   - Writes are atomic: a reader sees the old object, the new one, or none,
//     never a prefix. Concurrent Puts of one key end with exactly one of
//     them stored whole.
//   - Errors wrap the categories below; check them with errors.Is.
package objstore

import (
	"context"
	"fmt"
	"io"
	"iter"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Errors returned by every Store implementation. Each wraps a sandbox
// category so transports map it without knowing about the object store,
// while callers can still tell "the object is missing" (objstore.ErrNotFound)
// from "the sandbox is missing" (sandbox.ErrNotFound alone).
var (
	// ErrNotFound: no object with that key, or no such bucket.
	ErrNotFound = fmt.Errorf("object %w", sandbox.ErrNotFound)
	// ErrInvalidArgument: a malformed bucket or key, or a Put whose reader
	// did not yield the announced size.
	ErrInvalidArgument = fmt.Errorf("object store: %w", sandbox.ErrInvalidArgument)
	// ErrConflict: the key cannot be stored because of another key (the fs
	// store cannot hold both "a" and "a/b": one would be a file, the other
	// a directory).
	ErrConflict = fmt.Errorf("object store: %w", sandbox.ErrConflict)
	// ErrUnavailable: the store could not be reached or failed on its side
	// (network error, 5xx). Retrying later may succeed.
	ErrUnavailable = fmt.Errorf("object store %w", sandbox.ErrUnavailable)
)

// SizeUnknown is the size to pass to Put when the length of the stream is
// not known in advance; the object is then streamed (multipart on S3).
const SizeUnknown int64 = -1

// Info describes one stored object.
type Info struct {
	// Key is the object's key within its bucket.
	Key string
	// Size is the object's length in bytes.
	Size int64
	// ModTime is when the object was last written (or touched). Chunk
	// garbage collection uses it as a grace period for in-flight writers.
	ModTime time.Time
}

// Store stores immutable-by-convention blobs under (bucket, key).
type Store interface {
	// EnsureBucket creates bucket if it does not exist. It returns nil if
	// the bucket already exists, and ErrInvalidArgument for a malformed name.
	EnsureBucket(ctx context.Context, bucket string) error

	// Put stores the bytes of r under key, replacing any object there. size
	// is the exact length r yields, or SizeUnknown to stream. The write is
	// atomic: until Put returns nil, readers see the previous object (or
	// none). It returns ErrNotFound if the bucket does not exist,
	// ErrInvalidArgument for a malformed bucket or key or when r yields a
	// different number of bytes than size (nothing is stored then),
	// ErrConflict when the key collides with another key's path (fs only),
	// and the reader's own error if reading r fails.
	Put(ctx context.Context, bucket, key string, r io.Reader, size int64) error

	// Get opens the object for reading. The caller must Close it. It
	// returns ErrNotFound if the object or the bucket does not exist and
	// ErrInvalidArgument for a malformed bucket or key.
	Get(ctx context.Context, bucket, key string) (io.ReadCloser, error)

	// Stat returns the object's size and modification time. It returns
	// ErrNotFound if the object or bucket does not exist and
	// ErrInvalidArgument for a malformed bucket or key.
	Stat(ctx context.Context, bucket, key string) (Info, error)

	// Touch sets the object's ModTime to now without changing its content,
	// so a writer that reuses an existing chunk protects it from a garbage
	// collector's grace period. It returns ErrNotFound if the object or
	// bucket does not exist and ErrInvalidArgument for a malformed bucket
	// or key.
	Touch(ctx context.Context, bucket, key string) error

	// Delete removes the object. Deleting a missing object, or one in a
	// missing bucket, returns nil: callers retry deletes freely. It
	// returns ErrInvalidArgument for a malformed bucket or key.
	Delete(ctx context.Context, bucket, key string) error

	// List yields every object whose key starts with prefix (a plain string
	// prefix, not a directory), in no particular order. An error ends the
	// sequence: it is yielded once with a zero Info. Listing a missing
	// bucket yields ErrNotFound; a malformed bucket or prefix yields
	// ErrInvalidArgument. Objects put or deleted while listing may or may
	// not be seen. Breaking out of the loop early releases its resources.
	List(ctx context.Context, bucket, prefix string) iter.Seq2[Info, error]
}
