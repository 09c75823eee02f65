package archive_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"

	"github.com/platinum-dev/platinum/internal/archive"
	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/objstore/fs"
	"github.com/platinum-dev/platinum/internal/objstore/objstoretest"
	"github.com/platinum-dev/platinum/internal/objstore/s3"
	"github.com/platinum-dev/platinum/internal/objstore/s3/s3test"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

const mib = 1 << 20

// region is a run of bytes written into a sparse file.
type region struct {
	off, n int64
	kind   byte // 'r' random, 't' text-like (compressible), 'z' explicit zeros
}

// fill returns n bytes of the given kind from rng.
func fill(rng *mrand.ChaCha8, n int64, kind byte) []byte {
	b := make([]byte, n)
	switch kind {
	case 'r':
		rng.Read(b)
	case 't':
		words := []string{"sandbox ", "platinum ", "archive ", "chunk ", "zstd ", "\n", "the ", "of ", "data ", "0x7f3a ", "{\"k\": 1} "}
		for i := 0; i < len(b); {
			i += copy(b[i:], words[rng.Uint64()%uint64(len(words))])
		}
	}
	return b
}

// makeSparse creates a sparse file of size with regions written (and
// nothing else allocated) and returns its hex SHA-256.
func makeSparse(t testing.TB, path string, size int64, regions []region, seed uint64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	rng := mrand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	for _, r := range regions {
		if _, err := f.WriteAt(fill(rng, r.n, r.kind), r.off); err != nil {
			t.Fatal(err)
		}
	}
	return fileSHA(t, path)
}

// sparseDisk writes the sparseLayout image, filled from seed, as disk.img
// in a fresh temporary dir, and returns the dir, the image's path and its
// SHA-256.
func sparseDisk(t testing.TB, seed uint64) (dir, src, sum string) {
	t.Helper()
	dir = t.TempDir()
	src = filepath.Join(dir, "disk.img")
	size, regions, _ := sparseLayout()
	return dir, src, makeSparse(t, src, size, regions, seed)
}

func fileSHA(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// allocated returns the bytes a file really occupies on disk.
func allocated(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

func newFS(t testing.TB) (*fs.Store, string) {
	t.Helper()
	s, err := fs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s, objstoretest.NewBucket(t, s)
}

// stores are the object stores the round trip runs on: fs always, S3 when
// a server can be started (s3test skips outside CI when versitygw is not
// installed).
var stores = []struct {
	name string
	open func(t *testing.T) objstore.Store
}{
	{"fs", func(t *testing.T) objstore.Store { s, _ := newFS(t); return s }},
	{"s3", func(t *testing.T) objstore.Store {
		s, err := s3.New(s3test.Start(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
}

// sparseLayout is 200 MiB plus an odd tail: random and text regions,
// aligned and not, crossing chunk boundaries, a few bytes alone in a
// chunk, explicit zeros (allocated but a hole by content), and data in
// the short last chunk.
func sparseLayout() (int64, []region, int64) {
	size := int64(200*mib + 12345)
	regions := []region{
		{0, 64 << 10, 't'},                  // a "superblock"
		{4 * mib, 8 * mib, 'r'},             // two whole chunks
		{14*mib + 100, 3 * mib, 'r'},        // unaligned, crosses a boundary
		{30 * mib, 10 * mib, 't'},           // compressible
		{50*mib + 4096*3, 100, 'r'},         // a few bytes alone in a chunk
		{60 * mib, 8 * mib, 'z'},            // written zeros
		{100*mib - 5000, 10000, 'r'},        // straddles a boundary
		{120 * mib, 20 * mib, 'r'},          // bulk data
		{150 * mib, 4 * mib, 't'},           //
		{200*mib + 1000, 11345 - 1000, 'r'}, // inside the short last chunk
	}
	var data int64
	for _, r := range regions {
		if r.kind != 'z' {
			data += r.n
		}
	}
	return size, regions, data
}

func TestRoundTripSparse(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			store := st.open(t)
			bucket := objstoretest.NewBucket(t, store)
			dir := t.TempDir()
			src := filepath.Join(dir, "disk.img")
			size, regions, dataBytes := sparseLayout()
			want := makeSparse(t, src, size, regions, 1)
			ctx := context.Background()

			var calls []int64
			res, err := archive.WriteFile(ctx, store, bucket, src, archive.Options{
				Progress: func(done, total int64) {
					if total != size {
						t.Errorf("progress total %d, want %d", total, size)
					}
					calls = append(calls, done)
				},
			})
			if err != nil {
				t.Fatalf("WriteFile: %v", err)
			}
			m := res.Manifest
			if m.SHA256 != chunkListDigest(t, src, archive.DefaultChunkSize) {
				t.Errorf("manifest sha256 %s, want the digest of the file's chunk digests", m.SHA256)
			}
			if m.Version != archive.FormatVersion {
				t.Errorf("manifest version %d, want %d", m.Version, archive.FormatVersion)
			}
			if m.Size != size || m.ChunkSize != archive.DefaultChunkSize || len(m.Chunks) != 51 {
				t.Errorf("manifest size %d chunk %d chunks %d", m.Size, m.ChunkSize, len(m.Chunks))
			}
			checkProgress(t, calls, size)
			holes := 0
			for _, h := range m.Chunks {
				if h == "" {
					holes++
				}
			}
			if holes != res.Holes || holes < 30 {
				t.Errorf("holes: manifest %d, result %d; want the same and most of 51", holes, res.Holes)
			}
			if got := res.ChunksUploaded + res.ChunksReused + res.Holes; got != len(m.Chunks) {
				t.Errorf("uploaded %d + reused %d + holes %d != %d chunks", res.ChunksUploaded, res.ChunksReused, res.Holes, len(m.Chunks))
			}
			if res.ChunksReused != 0 || res.BytesUploaded <= 0 || res.BytesUploaded >= m.DataBytes {
				t.Errorf("fresh bucket: reused %d, uploaded %d bytes for %d data bytes", res.ChunksReused, res.BytesUploaded, m.DataBytes)
			}

			dst := filepath.Join(dir, "restored.img")
			got, err := archive.Restore(ctx, store, bucket, res.Key, dst, archive.RestoreOptions{})
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if diff := cmp.Diff(m, got); diff != "" {
				t.Errorf("Restore returned another manifest (-written +read):\n%s", diff)
			}
			if sum := fileSHA(t, dst); sum != want {
				t.Fatalf("restored sha256 %s, want %s", sum, want)
			}
			fi, _ := os.Stat(dst)
			if fi.Size() != size {
				t.Fatalf("restored size %d, want %d", fi.Size(), size)
			}
			// Sparse: about the data written, not the 200 MB (nor the 8 MB
			// of written zeros the source has allocated).
			alloc := allocated(t, dst)
			if limit := dataBytes + 2*mib; alloc > limit {
				t.Errorf("restored file allocates %d bytes, want at most %d (data %d, size %d)", alloc, limit, dataBytes, size)
			}
			t.Logf("size %d, data %d, source allocates %d, restored allocates %d, stored %d",
				size, dataBytes, allocated(t, src), alloc, m.StoredBytes)
		})
	}
}

func checkProgress(t *testing.T, calls []int64, total int64) {
	t.Helper()
	if len(calls) == 0 || calls[len(calls)-1] != total {
		t.Fatalf("progress calls %v: want to end at %d", calls, total)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i] <= calls[i-1] {
			t.Fatalf("progress went from %d to %d", calls[i-1], calls[i])
		}
	}
}

// countingStore counts Puts by key prefix and can fail Puts of chunks after
// a number of successful ones, or run a hook before a manifest Put.
type countingStore struct {
	objstore.Store
	chunkPuts, manifestPuts atomic.Int64
	// FailChunkPutsAfter, when > 0, makes every chunk Put after that many
	// fail with objstore.ErrUnavailable.
	FailChunkPutsAfter int64
	// BeforeManifestPutFunc, if set, runs before a manifest is stored.
	BeforeManifestPutFunc func()
}

var _ objstore.Store = (*countingStore)(nil)

func (c *countingStore) Put(ctx context.Context, bucket, key string, r io.Reader, size int64) error {
	switch {
	case strings.HasPrefix(key, archive.ChunkPrefix):
		if n := c.chunkPuts.Add(1); c.FailChunkPutsAfter > 0 && n > c.FailChunkPutsAfter {
			return fmt.Errorf("injected: %w", objstore.ErrUnavailable)
		}
	case strings.HasPrefix(key, archive.ManifestPrefix):
		c.manifestPuts.Add(1)
		if c.BeforeManifestPutFunc != nil {
			c.BeforeManifestPutFunc()
		}
	}
	return c.Store.Put(ctx, bucket, key, r, size)
}

func TestSecondArchiveUploadsNothingNew(t *testing.T) {
	base, bucket := newFS(t)
	store := &countingStore{Store: base}
	src := filepath.Join(t.TempDir(), "disk.img")
	size, regions, _ := sparseLayout()
	makeSparse(t, src, size, regions, 2)
	ctx := context.Background()
	first, err := archive.WriteFile(ctx, store, bucket, src, archive.Options{ID: "first"})
	if err != nil {
		t.Fatal(err)
	}
	uploads := store.chunkPuts.Load()
	if uploads == 0 || int(uploads) != first.ChunksUploaded {
		t.Fatalf("first archive: %d chunk Puts, result says %d", uploads, first.ChunksUploaded)
	}
	second, err := archive.WriteFile(ctx, store, bucket, src, archive.Options{ID: "second"})
	if err != nil {
		t.Fatal(err)
	}
	if n := store.chunkPuts.Load() - uploads; n != 0 || second.ChunksUploaded != 0 || second.BytesUploaded != 0 {
		t.Errorf("second archive of the same file: %d chunk Puts, result %d uploaded (%d bytes); want none",
			n, second.ChunksUploaded, second.BytesUploaded)
	}
	if second.ChunksReused != first.ChunksUploaded {
		t.Errorf("second archive reused %d chunks, first uploaded %d", second.ChunksReused, first.ChunksUploaded)
	}
	if diff := cmp.Diff(first.Manifest.Chunks, second.Manifest.Chunks); diff != "" {
		t.Errorf("chunk lists differ:\n%s", diff)
	}
	if store.manifestPuts.Load() != 2 {
		t.Errorf("%d manifest Puts, want 2", store.manifestPuts.Load())
	}
}

// TestIdenticalChunksStoredOnce: repeated content inside one input is one
// chunk object.
func TestIdenticalChunksStoredOnce(t *testing.T) {
	base, bucket := newFS(t)
	store := &countingStore{Store: base}
	block := fill(mrand.NewChaCha8([32]byte{9}), 64<<10, 'r')
	data := bytes.Repeat(block, 64*10) // ten identical 4 MiB chunks
	res, err := archive.Write(context.Background(), store, bucket, bytes.NewReader(data), int64(len(data)), archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ChunksUploaded != 1 || store.chunkPuts.Load() != 1 {
		t.Errorf("ten identical chunks: %d uploaded, %d Puts; want 1", res.ChunksUploaded, store.chunkPuts.Load())
	}
}

func listKeys(t testing.TB, s objstore.Store, bucket, prefix string) []string {
	t.Helper()
	var keys []string
	for info, err := range s.List(context.Background(), bucket, prefix) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

func TestFailureHalfwayThenRetry(t *testing.T) {
	base, bucket := newFS(t)
	dir, src, want := sparseDisk(t, 3)
	ctx := context.Background()

	// One worker, so the 3 Puts before the failure complete (with more,
	// the failure may cancel Puts in flight).
	failing := &countingStore{Store: base, FailChunkPutsAfter: 3}
	_, err := archive.WriteFile(ctx, failing, bucket, src, archive.Options{ID: "arc1", Workers: 1})
	if !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("Write with the store failing = %v, want ErrUnavailable", err)
	}
	if keys := listKeys(t, base, bucket, archive.ManifestPrefix); len(keys) != 0 {
		t.Fatalf("manifests after a failed write: %v", keys)
	}
	if _, err := archive.ReadManifest(ctx, base, bucket, archive.ManifestKey("arc1")); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("ReadManifest of the failed archive = %v, want ErrNotFound", err)
	}
	left := listKeys(t, base, bucket, archive.ChunkPrefix)
	if len(left) != 3 {
		t.Fatalf("%d chunks after 3 successful Puts: %v", len(left), left)
	}

	res, err := archive.WriteFile(ctx, base, bucket, src, archive.Options{ID: "arc1"})
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if res.ChunksReused != 3 {
		t.Errorf("retry reused %d chunks, want the 3 the failed write stored", res.ChunksReused)
	}
	dst := filepath.Join(dir, "restored.img")
	if _, err := archive.Restore(ctx, base, bucket, res.Key, dst, archive.RestoreOptions{}); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got := fileSHA(t, dst); got != want {
		t.Fatalf("restored sha256 %s, want %s", got, want)
	}
}

// failingReaderAt fails reads at or past off.
type failingReaderAt struct {
	r   io.ReaderAt
	off int64
}

func (f failingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.off {
		return 0, errors.New("injected: disk read error")
	}
	return f.r.ReadAt(p, off)
}

func TestWriteFailuresLeaveNoManifest(t *testing.T) {
	data := fill(mrand.NewChaCha8([32]byte{4}), 40*mib, 'r')
	tests := []struct {
		name string
		src  io.ReaderAt
		ctx  func() context.Context
	}{
		{"source read error", failingReaderAt{bytes.NewReader(data), 20 * mib}, context.Background},
		{"source shorter than size", bytes.NewReader(data[:30*mib]), context.Background},
		{"cancelled", bytes.NewReader(data), func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store, bucket := newFS(t)
			if _, err := archive.Write(tc.ctx(), store, bucket, tc.src, int64(len(data)), archive.Options{}); err == nil {
				t.Fatal("Write succeeded")
			}
			if keys := listKeys(t, store, bucket, archive.ManifestPrefix); len(keys) != 0 {
				t.Fatalf("manifests after a failed write: %v", keys)
			}
		})
	}
}

func TestWriteExistingID(t *testing.T) {
	store, bucket := newFS(t)
	ctx := context.Background()
	data := []byte("hello")
	if _, err := archive.Write(ctx, store, bucket, bytes.NewReader(data), 5, archive.Options{ID: "same"}); err != nil {
		t.Fatal(err)
	}
	_, err := archive.Write(ctx, store, bucket, bytes.NewReader(data), 5, archive.Options{ID: "same"})
	if !errors.Is(err, sandbox.ErrAlreadyExists) {
		t.Fatalf("second Write with the same ID = %v, want ErrAlreadyExists", err)
	}
}

// TestRestoreVersion1 restores manifests of the first format, whose digest
// is the whole file's SHA-256, and still rejects a wrong one.
func TestRestoreVersion1(t *testing.T) {
	tests := []struct {
		name    string
		sha     func(fileSHA string) string
		wantErr error
	}{
		{"file's sha256", func(s string) string { return s }, nil},
		{"other sha256", func(string) string { return strings.Repeat("ab", 32) }, archive.ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, bucket := newFS(t)
			dir, src, want := sparseDisk(t, 5)
			ctx := context.Background()
			res, err := archive.WriteFile(ctx, store, bucket, src, archive.Options{ID: "old"})
			if err != nil {
				t.Fatal(err)
			}
			m := res.Manifest
			m.Version, m.SHA256 = 1, tt.sha(want)
			putManifest(t, store, bucket, m)
			dst := filepath.Join(dir, "restored.img")
			_, err = archive.Restore(ctx, store, bucket, m.Key(), dst, archive.RestoreOptions{})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Restore = %v, want %v", err, tt.wantErr)
			}
			if err == nil {
				if got := fileSHA(t, dst); got != want {
					t.Fatalf("restored sha256 %s, want %s", got, want)
				}
			}
		})
	}
}

func TestSizes(t *testing.T) {
	tests := []struct {
		name      string
		size      int64
		chunkSize int64
	}{
		{"empty", 0, 0},
		{"one byte", 1, 0},
		{"under a chunk", 4096*3 + 7, 0},
		{"exact chunks", 3 * 8192, 8192},
		{"one over", 3*8192 + 1, 8192},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store, bucket := newFS(t)
			ctx := context.Background()
			data := fill(mrand.NewChaCha8([32]byte{5}), tc.size, 'r')
			res, err := archive.Write(ctx, store, bucket, bytes.NewReader(data), tc.size, archive.Options{ChunkSize: tc.chunkSize})
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "out")
			if _, err := archive.Restore(ctx, store, bucket, res.Key, dst, archive.RestoreOptions{Workers: 1}); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(dst)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("restored %d bytes (%v), want the %d written", len(got), err, len(data))
			}
		})
	}
}

// TestZeroChunksFromAnyReader: without SEEK_HOLE (not an *os.File), chunks
// of zeros are still found by content.
func TestZeroChunksFromAnyReader(t *testing.T) {
	store, bucket := newFS(t)
	data := make([]byte, 12*mib)
	copy(data[5*mib:], "not zero")
	res, err := archive.Write(context.Background(), store, bucket, bytes.NewReader(data), int64(len(data)), archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]bool{true, false, true}, []bool{res.Manifest.Chunks[0] == "", res.Manifest.Chunks[1] == "", res.Manifest.Chunks[2] == ""}); diff != "" {
		t.Errorf("holes (-want +got):\n%s", diff)
	}
	if res.ChunksUploaded != 1 || res.Holes != 2 {
		t.Errorf("uploaded %d holes %d, want 1 and 2", res.ChunksUploaded, res.Holes)
	}
}

func TestRestoreDetectsCorruption(t *testing.T) {
	ctx := context.Background()
	data := fill(mrand.NewChaCha8([32]byte{6}), 10*mib, 'r')
	enc, _ := zstd.NewWriter(nil)
	otherChunk := enc.EncodeAll(fill(mrand.NewChaCha8([32]byte{7}), 4*mib, 'r'), nil)
	tests := []struct {
		name    string
		corrupt func(t *testing.T, s objstore.Store, bucket string, m archive.Manifest)
		want    error
	}{
		{"chunk with other content", func(t *testing.T, s objstore.Store, bucket string, m archive.Manifest) {
			if err := s.Put(ctx, bucket, archive.ChunkKey(m.Chunks[1]), bytes.NewReader(otherChunk), int64(len(otherChunk))); err != nil {
				t.Fatal(err)
			}
		}, archive.ErrCorrupt},
		{"chunk not zstd", func(t *testing.T, s objstore.Store, bucket string, m archive.Manifest) {
			if err := s.Put(ctx, bucket, archive.ChunkKey(m.Chunks[0]), strings.NewReader("garbage"), 7); err != nil {
				t.Fatal(err)
			}
		}, archive.ErrCorrupt},
		{"chunk missing", func(t *testing.T, s objstore.Store, bucket string, m archive.Manifest) {
			if err := s.Delete(ctx, bucket, archive.ChunkKey(m.Chunks[2])); err != nil {
				t.Fatal(err)
			}
		}, objstore.ErrNotFound},
		{"whole-file hash", func(t *testing.T, s objstore.Store, bucket string, m archive.Manifest) {
			m.SHA256 = strings.Repeat("0", 64)
			putManifest(t, s, bucket, m)
		}, archive.ErrCorrupt},
		{"chunk count", func(t *testing.T, s objstore.Store, bucket string, m archive.Manifest) {
			m.Chunks = m.Chunks[:2]
			putManifest(t, s, bucket, m)
		}, archive.ErrCorrupt},
		{"chunk name", func(t *testing.T, s objstore.Store, bucket string, m archive.Manifest) {
			m.Chunks[0] = "../../etc/passwd"
			putManifest(t, s, bucket, m)
		}, archive.ErrCorrupt},
		{"version", func(t *testing.T, s objstore.Store, bucket string, m archive.Manifest) {
			m.Version = 99
			putManifest(t, s, bucket, m)
		}, archive.ErrCorrupt},
		{"not json", func(t *testing.T, s objstore.Store, bucket string, m archive.Manifest) {
			if err := s.Put(ctx, bucket, m.Key(), strings.NewReader("{"), 1); err != nil {
				t.Fatal(err)
			}
		}, archive.ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store, bucket := newFS(t)
			res, err := archive.Write(ctx, store, bucket, bytes.NewReader(data), int64(len(data)), archive.Options{})
			if err != nil {
				t.Fatal(err)
			}
			tc.corrupt(t, store, bucket, res.Manifest)
			dir := t.TempDir()
			dst := filepath.Join(dir, "disk.img")
			if err := os.WriteFile(dst, []byte("previous"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = archive.Restore(ctx, store, bucket, res.Key, dst, archive.RestoreOptions{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Restore = %v, want %v", err, tc.want)
			}
			if got, _ := os.ReadFile(dst); string(got) != "previous" {
				t.Errorf("a failed Restore changed the destination (%d bytes)", len(got))
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("a failed Restore left files: %v", entries)
			}
		})
	}
}

func putManifest(t *testing.T, s objstore.Store, bucket string, m archive.Manifest) {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(context.Background(), bucket, m.Key(), bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
}

func TestManifestKeys(t *testing.T) {
	store, bucket := newFS(t)
	ctx := context.Background()
	for _, key := range []string{"chunks/" + strings.Repeat("a", 64), "manifests/x", "manifests/../chunks/x.json", "other.json"} {
		if err := archive.DeleteManifest(ctx, store, bucket, key); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("DeleteManifest(%q) = %v, want ErrInvalidArgument", key, err)
		}
		if _, err := archive.ReadManifest(ctx, store, bucket, key); !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("ReadManifest(%q) = %v, want ErrInvalidArgument", key, err)
		}
	}
	for _, id := range []string{"", ".hidden", "a/b", "sp ace", strings.Repeat("x", 129)} {
		_, err := archive.Write(ctx, store, bucket, bytes.NewReader(nil), 0, archive.Options{ID: id})
		if id != "" && !errors.Is(err, sandbox.ErrInvalidArgument) {
			t.Errorf("Write with ID %q = %v, want ErrInvalidArgument", id, err)
		}
	}
	if err := archive.DeleteManifest(ctx, store, bucket, archive.ManifestKey("never")); err != nil {
		t.Errorf("DeleteManifest of a missing archive: %v", err)
	}
}

// gcFixture writes two archives that share chunks plus orphan chunks.
type gcFixture struct {
	store          objstore.Store
	bucket         string
	a, b           archive.Result
	srcA, srcB     string
	wantA, wantB   string
	onlyA, orphans []string // chunk hashes
}

func newGCFixture(t *testing.T) *gcFixture {
	t.Helper()
	store, bucket := newFS(t)
	ctx := context.Background()
	dir := t.TempDir()
	f := &gcFixture{store: store, bucket: bucket, srcA: filepath.Join(dir, "a.img"), srcB: filepath.Join(dir, "b.img")}
	shared := []region{{0, 8 * mib, 'r'}}
	f.wantA = makeSparse(t, f.srcA, 32*mib, append(shared, region{16 * mib, 8 * mib, 'r'}), 10)
	// Same seed: the first 8 MiB are the same bytes; B's own data differs.
	f.wantB = makeSparse(t, f.srcB, 32*mib, append(shared, region{24 * mib, 4 * mib, 't'}), 10)
	var err error
	if f.a, err = archive.WriteFile(ctx, store, bucket, f.srcA, archive.Options{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	if f.b, err = archive.WriteFile(ctx, store, bucket, f.srcB, archive.Options{ID: "b"}); err != nil {
		t.Fatal(err)
	}
	if f.b.ChunksReused != 2 {
		t.Fatalf("b reused %d chunks of a, want the 2 shared", f.b.ChunksReused)
	}
	inB := map[string]bool{}
	for _, h := range f.b.Manifest.Chunks {
		inB[h] = true
	}
	for _, h := range f.a.Manifest.Chunks {
		if h != "" && !inB[h] {
			f.onlyA = append(f.onlyA, h)
		}
	}
	// Orphans: chunks of a write that failed before its manifest.
	failing := &countingStore{Store: store, FailChunkPutsAfter: 2}
	orphanSrc := fill(mrand.NewChaCha8([32]byte{11}), 16*mib, 'r')
	if _, err := archive.Write(ctx, failing, bucket, bytes.NewReader(orphanSrc), int64(len(orphanSrc)), archive.Options{Workers: 1}); err == nil {
		t.Fatal("failing write succeeded")
	}
	for i := range 2 {
		sum := sha256.Sum256(orphanSrc[i*4*mib : (i+1)*4*mib])
		f.orphans = append(f.orphans, hex.EncodeToString(sum[:]))
	}
	return f
}

func (f *gcFixture) exists(t *testing.T, hash string) bool {
	t.Helper()
	_, err := f.store.Stat(context.Background(), f.bucket, archive.ChunkKey(hash))
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func (f *gcFixture) restoreB(t *testing.T) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "b.img")
	if _, err := archive.Restore(context.Background(), f.store, f.bucket, f.b.Key, dst, archive.RestoreOptions{}); err != nil {
		t.Fatalf("Restore b: %v", err)
	}
	if got := fileSHA(t, dst); got != f.wantB {
		t.Fatalf("restored b sha256 %s, want %s", got, f.wantB)
	}
}

func later() time.Time { return time.Now().Add(archive.DefaultGCGrace + time.Hour) }

func TestGC(t *testing.T) {
	ctx := context.Background()
	f := newGCFixture(t)

	// Within the grace period nothing goes, not even orphans.
	res, err := archive.GC(ctx, f.store, f.bucket, archive.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 0 || res.Young != len(f.orphans) {
		t.Fatalf("GC now: %+v; want nothing deleted, %d young orphans", res, len(f.orphans))
	}

	// Past it, orphans go and chunks of live manifests stay.
	res, err = archive.GC(ctx, f.store, f.bucket, archive.GCOptions{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	want := archive.GCResult{Manifests: 2, Referenced: 2 + len(f.onlyA) + 1, Chunks: 2 + len(f.onlyA) + 1 + 2, Deleted: 2, DeletedBytes: res.DeletedBytes}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("GC past grace (-want +got):\n%s", diff)
	}
	for _, h := range f.orphans {
		if f.exists(t, h) {
			t.Errorf("orphan chunk %s kept", h)
		}
	}
	for _, m := range []archive.Manifest{f.a.Manifest, f.b.Manifest} {
		for _, h := range m.Chunks {
			if h != "" && !f.exists(t, h) {
				t.Errorf("chunk %s of live archive %s deleted", h, m.ID)
			}
		}
	}
}

func TestDeleteManifestKeepsSharedChunks(t *testing.T) {
	ctx := context.Background()
	f := newGCFixture(t)
	if err := archive.DeleteManifest(ctx, f.store, f.bucket, f.a.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := archive.ReadManifest(ctx, f.store, f.bucket, f.a.Key); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("ReadManifest after DeleteManifest = %v, want ErrNotFound", err)
	}
	// DeleteManifest alone removes no chunk.
	for _, h := range f.a.Manifest.Chunks {
		if h != "" && !f.exists(t, h) {
			t.Fatalf("DeleteManifest removed chunk %s", h)
		}
	}
	f.restoreB(t)
	res, err := archive.GC(ctx, f.store, f.bucket, archive.GCOptions{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != len(f.onlyA)+len(f.orphans) || res.Missing != 0 {
		t.Errorf("GC: %+v; want %d deleted (a's own %d + orphans %d), none missing", res, len(f.onlyA)+len(f.orphans), len(f.onlyA), len(f.orphans))
	}
	for _, h := range f.onlyA {
		if f.exists(t, h) {
			t.Errorf("chunk %s only a used survived GC", h)
		}
	}
	f.restoreB(t)
}

func TestGCRefusesUnreadableManifest(t *testing.T) {
	ctx := context.Background()
	f := newGCFixture(t)
	if err := f.store.Put(ctx, f.bucket, archive.ManifestKey("broken"), strings.NewReader("{"), 1); err != nil {
		t.Fatal(err)
	}
	if err := archive.DeleteManifest(ctx, f.store, f.bucket, f.a.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := archive.GC(ctx, f.store, f.bucket, archive.GCOptions{Now: later}); !errors.Is(err, archive.ErrCorrupt) {
		t.Fatalf("GC with a broken manifest = %v, want ErrCorrupt", err)
	}
	for _, h := range append(f.onlyA, f.orphans...) {
		if !f.exists(t, h) {
			t.Fatalf("GC deleted chunk %s though it could not read every manifest", h)
		}
	}
}

func TestGCDryRun(t *testing.T) {
	f := newGCFixture(t)
	res, err := archive.GC(context.Background(), f.store, f.bucket, archive.GCOptions{Now: later, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != len(f.orphans) {
		t.Errorf("dry run would delete %d, want %d", res.Deleted, len(f.orphans))
	}
	for _, h := range f.orphans {
		if !f.exists(t, h) {
			t.Errorf("dry run deleted %s", h)
		}
	}
}

// TestGCDuringWriteReusingOldOrphan is the race GC's grace period is for:
// a Write reuses a chunk that is unreferenced and old (an orphan), and GC
// runs after the chunk was found but before the manifest is stored. The
// Write touched the chunk, so GC keeps it and the archive restores.
func TestGCDuringWriteReusingOldOrphan(t *testing.T) {
	ctx := context.Background()
	f := newGCFixture(t)
	base := f.store.(*fs.Store)
	// Age the orphans as if the failed write were two days old.
	old := time.Now().Add(-48 * time.Hour)
	for _, h := range f.orphans {
		p := filepath.Join(base.Dir(), f.bucket, filepath.FromSlash(archive.ChunkKey(h)))
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// The retry of the failed write: same content, so it reuses the orphans.
	orphanSrc := fill(mrand.NewChaCha8([32]byte{11}), 16*mib, 'r')
	var gcRes archive.GCResult
	var gcErr error
	var once sync.Once
	hooked := &countingStore{Store: f.store, BeforeManifestPutFunc: func() {
		once.Do(func() { gcRes, gcErr = archive.GC(ctx, f.store, f.bucket, archive.GCOptions{}) })
	}}
	res, err := archive.Write(ctx, hooked, f.bucket, bytes.NewReader(orphanSrc), int64(len(orphanSrc)), archive.Options{ID: "retry"})
	if err != nil {
		t.Fatal(err)
	}
	if gcErr != nil {
		t.Fatal(gcErr)
	}
	if res.ChunksReused != len(f.orphans) || gcRes.Deleted != 0 {
		t.Fatalf("write reused %d (want %d), GC in between deleted %d (want 0): %+v", res.ChunksReused, len(f.orphans), gcRes.Deleted, gcRes)
	}
	dst := filepath.Join(t.TempDir(), "retry.img")
	if _, err := archive.Restore(ctx, f.store, f.bucket, res.Key, dst, archive.RestoreOptions{}); err != nil {
		t.Fatalf("Restore after GC ran mid-write: %v", err)
	}
	got, _ := os.ReadFile(dst)
	if !bytes.Equal(got, orphanSrc) {
		t.Fatal("restored content differs")
	}
}

// TestRawFrame: chunks that do not compress are stored as raw zstd blocks,
// which the standard decoder reads back (and the zstd program too).
func TestRawFrame(t *testing.T) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	rng := mrand.NewChaCha8([32]byte{8})
	for _, n := range []int{0, 1, 128 << 10, 128<<10 + 1, 4 * mib, 3*mib + 17} {
		data := fill(rng, int64(n), 'r')
		frame := archive.RawFrame(data, nil)
		got, err := dec.DecodeAll(frame, nil)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("raw frame of %d bytes: decoded %d bytes, %v", n, len(got), err)
		}
		if overhead := len(frame) - n; overhead > 9+3*(n/(128<<10)+1) {
			t.Errorf("raw frame of %d bytes has %d bytes overhead", n, overhead)
		}
	}
}

// TestEncodeChoosesRawOnlyForIncompressible: random chunks are stored raw
// (a little over their size), text and half-zero chunks are compressed.
func TestEncodeChoosesRawOnlyForIncompressible(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	rng := mrand.NewChaCha8([32]byte{12})
	halfZero := fill(rng, 4*mib, 'r')
	clear(halfZero[2*mib:])
	tests := []struct {
		name    string
		data    []byte
		wantRaw bool
	}{
		{"random", fill(rng, 4*mib, 'r'), true},
		{"text", fill(rng, 4*mib, 't'), false},
		{"half zeros", halfZero, false},
	}
	for _, tc := range tests {
		out := archive.Encode(enc, tc.data, nil)
		raw := bytes.Equal(out, archive.RawFrame(tc.data, nil))
		if raw != tc.wantRaw {
			t.Errorf("%s: raw %v (%d → %d bytes), want raw %v", tc.name, raw, len(tc.data), len(out), tc.wantRaw)
		}
	}
}

// chunkListDigest computes a version 2 manifest digest from the file
// itself: SHA-256 over the SHA-256 of each chunkSize piece, in order.
func chunkListDigest(t *testing.T, path string, chunkSize int64) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	list := sha256.New()
	for off := 0; off < len(b); off += int(chunkSize) {
		sum := sha256.Sum256(b[off:min(off+int(chunkSize), len(b))])
		list.Write(sum[:])
	}
	return hex.EncodeToString(list.Sum(nil))
}
