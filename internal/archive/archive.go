// Package archive is Platinum's archive format: how a sandbox disk image (a
// large, mostly sparse file) is stored in an object store bucket and brought
// back.
//
// The input is cut into fixed-size chunks. A chunk that is all zeros is a
// hole and is not stored. Every other chunk is compressed with zstd and
// stored as chunks/<sha256 of its uncompressed bytes>, only if no chunk of
// that name exists yet: identical chunks are stored once per bucket and
// shared by every archive (and every sandbox) that contains them. Last, the
// manifest manifests/<id>.json lists the chunk names in order, with holes,
// and a digest binding the whole input (since version 2 the SHA-256 of the
// chunk digests, so holes are never hashed byte by byte). An archive exists once its manifest
// does: a write that fails or is killed halfway leaves at most some chunks,
// which a retry reuses and GC eventually removes.
//
// Deleting an archive (DeleteManifest) removes only its manifest, because
// its chunks may be shared. GC removes chunks no manifest references once
// they are older than a grace period, so it can run while archives are
// being written. The prefixes chunks/ and manifests/ of a bucket belong to
// this package.
package archive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Format constants.
const (
	// FormatVersion is the manifest version this package writes. It reads
	// this one and version 1, whose SHA256 is the whole input's (every
	// byte of every hole hashed: ~1.2 s of a core per 2 GiB of mostly
	// empty disk, on the critical path of Write and Restore).
	FormatVersion = 2
	// formatVersion1 is the first manifest version, still read.
	formatVersion1 = 1
	// CompressionZstd names the chunk encoding: one zstd frame per chunk.
	CompressionZstd = "zstd"
	// ChunkPrefix and ManifestPrefix are where chunks and manifests live in
	// the bucket.
	ChunkPrefix    = "chunks/"
	ManifestPrefix = "manifests/"
	manifestSuffix = ".json"
	// DefaultChunkSize balances dedup granularity and request count: 4 MiB
	// makes 256 objects per GiB of data.
	DefaultChunkSize = 4 << 20
	// MaxChunkSize bounds the memory a reader of a hostile manifest spends
	// per chunk.
	MaxChunkSize = 64 << 20
	// DefaultWorkers is how many chunks are compressed, verified and
	// transferred at once.
	DefaultWorkers = 4
	// maxManifestSize bounds ReadManifest (a 1 TiB image in 4 MiB chunks
	// is about 17 MB of JSON).
	maxManifestSize = 256 << 20
)

// ErrCorrupt reports stored data that does not match its manifest: a chunk
// whose content does not hash to its name, a manifest that is malformed, or
// a restored file whose SHA-256 differs from the recorded one.
var ErrCorrupt = errors.New("archive corrupt")

// Manifest describes one archive. It is stored as JSON at Key().
type Manifest struct {
	// Version is FormatVersion.
	Version int `json:"version"`
	// ID names the archive; the manifest is at ManifestKey(ID).
	ID string `json:"id"`
	// CreatedAt is when the write started (UTC).
	CreatedAt time.Time `json:"created_at"`
	// Size is the length of the input in bytes.
	Size int64 `json:"size"`
	// ChunkSize is the length of every chunk but the last.
	ChunkSize int64 `json:"chunk_size"`
	// Compression is CompressionZstd.
	Compression string `json:"compression"`
	// SHA256 binds the whole input, holes included. In version 2 it is
	// the hex SHA-256 of the chunks' 32-byte SHA-256 digests concatenated
	// in order, a hole's being the digest of its zeros (ListDigest), so
	// it never needs the holes hashed byte by byte; in version 1 it is
	// the SHA-256 of the input itself (what sha256sum prints).
	SHA256 string `json:"sha256"`
	// DataBytes is how many input bytes lie in chunks that are not holes.
	DataBytes int64 `json:"data_bytes"`
	// StoredBytes is the compressed size of the distinct chunks this
	// archive references, shared or not: what it costs if nothing else
	// shared them.
	StoredBytes int64 `json:"stored_bytes"`
	// Chunks lists, in order, the hex SHA-256 of each chunk's uncompressed
	// content, or "" for a hole (a chunk of zeros that is not stored).
	Chunks []string `json:"chunks"`
}

// Key returns where the manifest is stored.
func (m *Manifest) Key() string { return ManifestKey(m.ID) }

// ChunkLen returns the uncompressed length of chunk i.
func (m *Manifest) ChunkLen(i int) int64 {
	return min(m.ChunkSize, m.Size-int64(i)*m.ChunkSize)
}

// Validate checks the manifest is self-consistent, returning an error
// wrapping ErrCorrupt if not.
func (m *Manifest) Validate() error {
	switch {
	case m.Version != FormatVersion && m.Version != formatVersion1:
		return fmt.Errorf("manifest %s: version %d, want %d or %d: %w", m.ID, m.Version, formatVersion1, FormatVersion, ErrCorrupt)
	case validID(m.ID) != nil:
		return fmt.Errorf("manifest id %q: %w", m.ID, ErrCorrupt)
	case m.Compression != CompressionZstd:
		return fmt.Errorf("manifest %s: compression %q: %w", m.ID, m.Compression, ErrCorrupt)
	case m.Size < 0 || m.ChunkSize <= 0 || m.ChunkSize > MaxChunkSize:
		return fmt.Errorf("manifest %s: size %d, chunk size %d: %w", m.ID, m.Size, m.ChunkSize, ErrCorrupt)
	case int64(len(m.Chunks)) != (m.Size+m.ChunkSize-1)/m.ChunkSize:
		return fmt.Errorf("manifest %s: %d chunks for size %d: %w", m.ID, len(m.Chunks), m.Size, ErrCorrupt)
	case !isHash(m.SHA256):
		return fmt.Errorf("manifest %s: sha256 %q: %w", m.ID, m.SHA256, ErrCorrupt)
	}
	for i, h := range m.Chunks {
		if h != "" && !isHash(h) {
			return fmt.Errorf("manifest %s: chunk %d name %q: %w", m.ID, i, h, ErrCorrupt)
		}
	}
	if m.Version == FormatVersion {
		if got := ListDigest(m.Chunks, m.Size, m.ChunkSize); got != m.SHA256 {
			return fmt.Errorf("manifest %s: chunk list digests to %s, sha256 says %s: %w", m.ID, got, m.SHA256, ErrCorrupt)
		}
	}
	return nil
}

// ListDigest returns the version 2 manifest digest of an input of size
// bytes cut into chunkSize chunks whose hex SHA-256s are chunks ("" for a
// chunk of zeros): the hex SHA-256 of the 32-byte chunk digests in order.
// It binds every byte as a whole-input hash does, given that each chunk's
// content is checked against its digest, at the cost of hashing 32 bytes
// per chunk instead of the chunk. chunks must be valid hex digests or "".
func ListDigest(chunks []string, size, chunkSize int64) string {
	h := sha256.New()
	var d [sha256.Size]byte
	for i, c := range chunks {
		if c == "" {
			z := zeroDigest(min(chunkSize, size-int64(i)*chunkSize))
			h.Write(z[:])
			continue
		}
		if _, err := hex.Decode(d[:], []byte(c)); err != nil {
			d = [sha256.Size]byte{} // Validate rejects the name anyway
		}
		h.Write(d[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// zeroDigests caches the SHA-256 of n zero bytes by n: an archive has at
// most two hole lengths (the chunk size and the tail).
var zeroDigests sync.Map // int64 → [sha256.Size]byte

func zeroDigest(n int64) [sha256.Size]byte {
	if v, ok := zeroDigests.Load(n); ok {
		return v.([sha256.Size]byte)
	}
	h := sha256.New()
	writeZeros(h, max(n, 0))
	var d [sha256.Size]byte
	h.Sum(d[:0])
	zeroDigests.Store(n, d)
	return d
}

// ManifestKey returns the object key of archive id's manifest.
func ManifestKey(id string) string { return ManifestPrefix + id + manifestSuffix }

// ChunkKey returns the object key of the chunk whose uncompressed content
// has the given hex SHA-256.
func ChunkKey(hash string) string { return ChunkPrefix + hash }

// validID accepts 1 to 128 characters of [A-Za-z0-9._-] not starting with
// '.': safe as one key segment on every store.
func validID(id string) error {
	if id == "" || len(id) > 128 || id[0] == '.' {
		return fmt.Errorf("archive id %q: want 1 to 128 of [A-Za-z0-9._-], not starting with '.': %w", id, sandbox.ErrInvalidArgument)
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("archive id %q: want 1 to 128 of [A-Za-z0-9._-]: %w", id, sandbox.ErrInvalidArgument)
		}
	}
	return nil
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// checkManifestKey accepts only keys ManifestKey produces, so a caller's
// mistake cannot make DeleteManifest remove a shared chunk.
func checkManifestKey(key string) error {
	id, ok := strings.CutPrefix(key, ManifestPrefix)
	if ok {
		id, ok = strings.CutSuffix(id, manifestSuffix)
	}
	if !ok || validID(id) != nil {
		return fmt.Errorf("manifest key %q: want %s<id>%s: %w", key, ManifestPrefix, manifestSuffix, sandbox.ErrInvalidArgument)
	}
	return nil
}

// ReadManifest fetches and validates the manifest at key. It returns an
// error wrapping objstore.ErrNotFound if there is none (the archive does
// not exist or was never completed), sandbox.ErrInvalidArgument for a key
// that is not a manifest key, and ErrCorrupt for a malformed manifest.
func ReadManifest(ctx context.Context, store objstore.Store, bucket, key string) (Manifest, error) {
	if err := checkManifestKey(key); err != nil {
		return Manifest{}, err
	}
	rc, err := store.Get(ctx, bucket, key)
	if err != nil {
		return Manifest{}, fmt.Errorf("read manifest: %w", err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxManifestSize+1))
	if err != nil {
		return Manifest{}, fmt.Errorf("read manifest %s: %w", key, err)
	}
	if len(data) > maxManifestSize {
		return Manifest{}, fmt.Errorf("manifest %s: larger than %d bytes: %w", key, maxManifestSize, ErrCorrupt)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("manifest %s: %v: %w", key, err, ErrCorrupt)
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, err
	}
	if m.Key() != key {
		return Manifest{}, fmt.Errorf("manifest %s: names id %q: %w", key, m.ID, ErrCorrupt)
	}
	return m, nil
}

// DeleteManifest deletes the archive whose manifest is at key by removing
// the manifest only. Its chunks stay, since other archives (of this or
// other sandboxes) may share them; GC removes the ones nothing references
// any more. Deleting a missing manifest returns nil. It returns
// sandbox.ErrInvalidArgument for a key that is not a manifest key.
func DeleteManifest(ctx context.Context, store objstore.Store, bucket, key string) error {
	if err := checkManifestKey(key); err != nil {
		return err
	}
	if err := store.Delete(ctx, bucket, key); err != nil {
		return fmt.Errorf("delete manifest: %w", err)
	}
	return nil
}

// progress serialises calls to a Progress callback and keeps its count, so
// callers see a monotonic done from one call at a time.
type progress struct {
	mu    sync.Mutex
	fn    func(done, total int64)
	total int64
	done  int64
}

func (p *progress) add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	if p.fn != nil {
		p.fn(p.done, p.total)
	}
}
