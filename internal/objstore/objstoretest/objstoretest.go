// Package objstoretest is the conformance suite for objstore.Store. Every
// implementation (fs, s3) runs Run from its own tests, so what the archive
// format relies on — atomic writes, streamed uploads of unknown size,
// ErrNotFound, idempotent deletes, prefix listing, bucket isolation — is
// pinned down once, not per backend.
package objstoretest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/objstore"
)

// Run runs every conformance test against stores made by newStore. newStore
// is called once per subtest; it may return the same store each time (a
// shared server), because every subtest works in buckets of its own with
// random names.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"EnsureBucket", testEnsureBucket},
		{"InvalidNames", testInvalidNames},
		{"RoundTrip", testRoundTrip},
		{"Overwrite", testOverwrite},
		{"NotFound", testNotFound},
		{"DeleteIdempotent", testDeleteIdempotent},
		{"ListPrefix", testListPrefix},
		{"ListEarlyBreak", testListEarlyBreak},
		{"SizeMismatch", testSizeMismatch},
		{"ReaderError", testReaderError},
		{"CancelledPut", testCancelledPut},
		{"Touch", testTouch},
		{"LargeStreamed", testLargeStreamed},
		{"ConcurrentPuts", testConcurrentPuts},
		{"ReadsDuringOverwrite", testReadsDuringOverwrite},
		{"BucketIsolation", testBucketIsolation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// NewBucket creates a bucket with a random name for one test.
func NewBucket(t testing.TB, s objstore.Store) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := "t-" + hex.EncodeToString(b[:])
	if err := s.EnsureBucket(context.Background(), name); err != nil {
		t.Fatalf("EnsureBucket(%s): %v", name, err)
	}
	return name
}

func put(t testing.TB, s objstore.Store, bucket, key string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), bucket, key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put(%s, %s): %v", bucket, key, err)
	}
}

// get returns the object's bytes, or the error of Get or of reading.
func get(s objstore.Store, bucket, key string) ([]byte, error) {
	rc, err := s.Get(context.Background(), bucket, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func mustGet(t testing.TB, s objstore.Store, bucket, key string) []byte {
	t.Helper()
	b, err := get(s, bucket, key)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", bucket, key, err)
	}
	return b
}

func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	switch {
	case target == nil && err != nil:
		t.Fatalf("%s: unexpected error: %v", what, err)
	case target != nil && !errors.Is(err, target):
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func testEnsureBucket(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	b := NewBucket(t, s)
	put(t, s, b, "k", []byte("v"))
	if err := s.EnsureBucket(ctx, b); err != nil {
		t.Fatalf("EnsureBucket of an existing bucket: %v", err)
	}
	if got := mustGet(t, s, b, "k"); string(got) != "v" {
		t.Fatalf("EnsureBucket again changed content: %q", got)
	}
}

func testInvalidNames(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	good := NewBucket(t, s)
	tests := []struct {
		name        string
		bucket, key string
	}{
		{"short bucket", "ab", "k"},
		{"upper-case bucket", "Bucket-" + good, "k"},
		{"bucket with slash", "a/b", "k"},
		{"bucket with dot dot", "..", "k"},
		{"empty key", good, ""},
		{"absolute key", good, "/etc/passwd"},
		{"dot-dot key", good, "../x"},
		{"inner dot-dot", good, "a/../../x"},
		{"dot segment", good, "a/./b"},
		{"trailing slash", good, "a/"},
		{"double slash", good, "a//b"},
		{"control char", good, "a\nb"},
		{"too long", good, string(bytes.Repeat([]byte("a/"), 600)) + "x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Put(ctx, tc.bucket, tc.key, bytes.NewReader(nil), 0)
			wantErr(t, "Put", err, objstore.ErrInvalidArgument)
			_, err = s.Get(ctx, tc.bucket, tc.key)
			wantErr(t, "Get", err, objstore.ErrInvalidArgument)
			_, err = s.Stat(ctx, tc.bucket, tc.key)
			wantErr(t, "Stat", err, objstore.ErrInvalidArgument)
			wantErr(t, "Touch", s.Touch(ctx, tc.bucket, tc.key), objstore.ErrInvalidArgument)
			wantErr(t, "Delete", s.Delete(ctx, tc.bucket, tc.key), objstore.ErrInvalidArgument)
		})
	}
	for _, p := range []string{"/x", "../", "a//", "a/../b"} {
		for _, err := range s.List(ctx, good, p) {
			wantErr(t, "List("+p+")", err, objstore.ErrInvalidArgument)
		}
	}
	wantErr(t, "EnsureBucket(UPPER)", s.EnsureBucket(ctx, "UPPER"), objstore.ErrInvalidArgument)
}

func testRoundTrip(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	b := NewBucket(t, s)
	tests := []struct {
		name    string
		key     string
		data    []byte
		unknown bool
	}{
		{"empty", "empty", nil, false},
		{"one byte", "one", []byte{0}, false},
		{"nested key", "a/b/c/d.json", []byte(`{"x":1}`), false},
		{"odd size", "chunks/0123abcd", randomBytes(1<<20 + 3), false},
		{"unknown size small", "streamed/small", randomBytes(1000), true},
		{"unknown size empty", "streamed/empty", nil, true},
		{"key with spaces and unicode", "dir name/ünï cödé +&=.bin", []byte("x"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			size := int64(len(tc.data))
			if tc.unknown {
				size = objstore.SizeUnknown
			}
			before := time.Now().Add(-time.Minute)
			if err := s.Put(ctx, b, tc.key, bytes.NewReader(tc.data), size); err != nil {
				t.Fatalf("Put: %v", err)
			}
			if got := mustGet(t, s, b, tc.key); !bytes.Equal(got, tc.data) {
				t.Fatalf("Get returned %d bytes, want %d (content differs)", len(got), len(tc.data))
			}
			info, err := s.Stat(ctx, b, tc.key)
			if err != nil {
				t.Fatalf("Stat: %v", err)
			}
			if info.Key != tc.key || info.Size != int64(len(tc.data)) {
				t.Fatalf("Stat = %+v, want key %q size %d", info, tc.key, len(tc.data))
			}
			if info.ModTime.Before(before) || info.ModTime.After(time.Now().Add(time.Minute)) {
				t.Fatalf("Stat ModTime %v is not about now", info.ModTime)
			}
		})
	}
}

func testOverwrite(t *testing.T, s objstore.Store) {
	b := NewBucket(t, s)
	put(t, s, b, "k", randomBytes(5000))
	v2 := []byte("short")
	put(t, s, b, "k", v2)
	if got := mustGet(t, s, b, "k"); !bytes.Equal(got, v2) {
		t.Fatalf("after overwrite Get = %q, want %q", got, v2)
	}
	info, err := s.Stat(context.Background(), b, "k")
	if err != nil || info.Size != int64(len(v2)) {
		t.Fatalf("Stat after overwrite = %+v, %v; want size %d", info, err, len(v2))
	}
}

func testNotFound(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	b := NewBucket(t, s)
	put(t, s, b, "dir/k", []byte("v"))
	missingBucket := "t-missing-" + hex.EncodeToString(randomBytes(4))
	tests := []struct {
		name        string
		bucket, key string
	}{
		{"missing key", b, "nope"},
		{"missing nested key", b, "dir/nope"},
		{"key below an object", b, "dir/k/deeper"},
		{"missing bucket", missingBucket, "k"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Get(ctx, tc.bucket, tc.key)
			wantErr(t, "Get", err, objstore.ErrNotFound)
			_, err = s.Stat(ctx, tc.bucket, tc.key)
			wantErr(t, "Stat", err, objstore.ErrNotFound)
			wantErr(t, "Touch", s.Touch(ctx, tc.bucket, tc.key), objstore.ErrNotFound)
		})
	}
	// "dir" is only a prefix of "dir/k", not an object.
	_, err := s.Stat(ctx, b, "dir")
	wantErr(t, "Stat(prefix of a key)", err, objstore.ErrNotFound)
	err = s.Put(ctx, missingBucket, "k", bytes.NewReader([]byte("v")), 1)
	wantErr(t, "Put to a missing bucket", err, objstore.ErrNotFound)
	for _, err := range s.List(ctx, missingBucket, "") {
		wantErr(t, "List of a missing bucket", err, objstore.ErrNotFound)
	}
}

func testDeleteIdempotent(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	b := NewBucket(t, s)
	put(t, s, b, "a/b/k", []byte("v"))
	put(t, s, b, "a/other", []byte("w"))
	for i := range 2 {
		if err := s.Delete(ctx, b, "a/b/k"); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	_, err := s.Get(ctx, b, "a/b/k")
	wantErr(t, "Get after Delete", err, objstore.ErrNotFound)
	if got := mustGet(t, s, b, "a/other"); string(got) != "w" {
		t.Fatalf("sibling changed: %q", got)
	}
	if err := s.Delete(ctx, b, "never/existed"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	if err := s.Delete(ctx, "t-missing-"+hex.EncodeToString(randomBytes(4)), "k"); err != nil {
		t.Fatalf("Delete in a missing bucket: %v", err)
	}
	// The key's directory is reusable after its last object went.
	put(t, s, b, "a/b/k2", []byte("x"))
	if got := mustGet(t, s, b, "a/b/k2"); string(got) != "x" {
		t.Fatalf("Get after re-put = %q", got)
	}
}

// collect lists bucket/prefix and returns key→size.
func collect(t testing.TB, s objstore.Store, bucket, prefix string) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	for info, err := range s.List(context.Background(), bucket, prefix) {
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		if _, dup := got[info.Key]; dup {
			t.Fatalf("List(%q) yielded %q twice", prefix, info.Key)
		}
		if info.ModTime.IsZero() {
			t.Fatalf("List(%q) yielded %q with zero ModTime", prefix, info.Key)
		}
		got[info.Key] = info.Size
	}
	return got
}

func testListPrefix(t *testing.T, s objstore.Store) {
	b := NewBucket(t, s)
	objects := map[string]int64{
		"chunks/aa01":       1,
		"chunks/aa02":       2,
		"chunks/ab03":       3,
		"chunksx":           4,
		"manifests/m1.json": 5,
		"manifests/sub/m2":  6,
		"top":               7,
	}
	for k, n := range objects {
		put(t, s, b, k, bytes.Repeat([]byte{'x'}, int(n)))
	}
	pick := func(keys ...string) map[string]int64 {
		m := map[string]int64{}
		for _, k := range keys {
			m[k] = objects[k]
		}
		return m
	}
	tests := []struct {
		prefix string
		want   map[string]int64
	}{
		{"", objects},
		{"chunks/", pick("chunks/aa01", "chunks/aa02", "chunks/ab03")},
		{"chunks/a", pick("chunks/aa01", "chunks/aa02", "chunks/ab03")},
		{"chunks/aa", pick("chunks/aa01", "chunks/aa02")},
		{"chunks/aa01", pick("chunks/aa01")},
		{"chunks", pick("chunks/aa01", "chunks/aa02", "chunks/ab03", "chunksx")},
		{"manifests/", pick("manifests/m1.json", "manifests/sub/m2")},
		{"manifests/s", pick("manifests/sub/m2")},
		{"t", pick("top")},
		{"nothing/", map[string]int64{}},
		{"chunks/zz", map[string]int64{}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("prefix %q", tc.prefix), func(t *testing.T) {
			if diff := cmp.Diff(tc.want, collect(t, s, b, tc.prefix)); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
		})
	}
}

func testListEarlyBreak(t *testing.T, s objstore.Store) {
	b := NewBucket(t, s)
	for i := range 30 {
		put(t, s, b, fmt.Sprintf("k/%02d", i), []byte{byte(i)})
	}
	for range 3 { // repeated early breaks must not leak or block
		n := 0
		for _, err := range s.List(context.Background(), b, "k/") {
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			n++
			if n == 5 {
				break
			}
		}
		if n != 5 {
			t.Fatalf("listed %d before break, want 5", n)
		}
	}
}

func testSizeMismatch(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	b := NewBucket(t, s)
	tests := []struct {
		name   string
		actual int
		size   int64
	}{
		{"reader shorter", 5, 10},
		{"reader longer", 15, 10},
		{"non-empty for zero", 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := "mismatch/" + tc.name
			err := s.Put(ctx, b, key, bytes.NewReader(randomBytes(tc.actual)), tc.size)
			wantErr(t, "Put", err, objstore.ErrInvalidArgument)
			_, err = s.Stat(ctx, b, key)
			wantErr(t, "Stat after failed Put", err, objstore.ErrNotFound)
		})
	}
}

// failingReader yields n random bytes, then err.
type failingReader struct {
	n   int
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, f.err
	}
	p = p[:min(len(p), f.n)]
	rand.Read(p)
	f.n -= len(p)
	return len(p), nil
}

func testReaderError(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	b := NewBucket(t, s)
	errBroken := errors.New("broken source")
	for _, size := range []int64{3 << 20, objstore.SizeUnknown} {
		t.Run(fmt.Sprintf("size %d", size), func(t *testing.T) {
			put(t, s, b, "k", []byte("old"))
			err := s.Put(ctx, b, "k", &failingReader{n: 1 << 20, err: errBroken}, size)
			if err == nil {
				t.Fatal("Put from a failing reader succeeded")
			}
			if got := mustGet(t, s, b, "k"); string(got) != "old" {
				t.Fatalf("after a failed Put the object is %d bytes, want the old 3", len(got))
			}
		})
	}
}

func testCancelledPut(t *testing.T, s objstore.Store) {
	b := NewBucket(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Put(ctx, b, "k", bytes.NewReader(randomBytes(1000)), 1000); err == nil {
		t.Fatal("Put with a cancelled context succeeded")
	}
	_, err := s.Stat(context.Background(), b, "k")
	wantErr(t, "Stat after cancelled Put", err, objstore.ErrNotFound)
}

func testTouch(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	b := NewBucket(t, s)
	data := randomBytes(4096)
	put(t, s, b, "chunks/c", data)
	before, err := s.Stat(ctx, b, "chunks/c")
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	// S3 reports ModTime in whole seconds: wait past the next one so the
	// touched time is observably later.
	time.Sleep(1100 * time.Millisecond)
	if err := s.Touch(ctx, b, "chunks/c"); err != nil {
		t.Fatalf("Touch: %v", err)
	}
	after, err := s.Stat(ctx, b, "chunks/c")
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if !after.ModTime.After(before.ModTime) {
		t.Fatalf("ModTime after Touch %v, before %v: not later", after.ModTime, before.ModTime)
	}
	if after.Size != int64(len(data)) {
		t.Fatalf("Touch changed size to %d", after.Size)
	}
	if got := mustGet(t, s, b, "chunks/c"); !bytes.Equal(got, data) {
		t.Fatal("Touch changed content")
	}
}

// seededReader yields n pseudo-random bytes of a seed, in reads of uneven
// sizes, so a streamed upload never sees aligned buffers.
type seededReader struct {
	rng *mrand.ChaCha8
	n   int64
}

func (r *seededReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n, 1<<20-17)]
	r.rng.Read(p)
	r.n -= int64(len(p))
	return len(p), nil
}

func testLargeStreamed(t *testing.T, s objstore.Store) {
	const size = 50 << 20
	ctx := context.Background()
	b := NewBucket(t, s)
	seed := [32]byte{1, 2, 3}
	want := sha256.New()
	io.Copy(want, &seededReader{rng: mrand.NewChaCha8(seed), n: size})
	if err := s.Put(ctx, b, "big", &seededReader{rng: mrand.NewChaCha8(seed), n: size}, objstore.SizeUnknown); err != nil {
		t.Fatalf("Put 50 MB of unknown size: %v", err)
	}
	info, err := s.Stat(ctx, b, "big")
	if err != nil || info.Size != size {
		t.Fatalf("Stat = %+v, %v; want size %d", info, err, size)
	}
	rc, err := s.Get(ctx, b, "big")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	defer rc.Close()
	got := sha256.New()
	n, err := io.Copy(got, rc)
	if err != nil || n != size {
		t.Fatalf("read %d bytes, %v; want %d", n, err, size)
	}
	if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatal("50 MB object content differs")
	}
}

// version returns the content writer i puts: a distinct length, every byte i.
func version(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 256<<10+i*4099) }

// checkVersion fails unless data is exactly one writer's whole content.
func checkVersion(data []byte, writers int) error {
	if len(data) == 0 {
		return errors.New("empty object")
	}
	i := int(data[0] - 'a')
	if i < 0 || i >= writers {
		return fmt.Errorf("first byte %q is no writer's", data[0])
	}
	if !bytes.Equal(data, version(i)) {
		return fmt.Errorf("object starts as writer %d's but is not its whole content (%d bytes, want %d)", i, len(data), len(version(i)))
	}
	return nil
}

func testConcurrentPuts(t *testing.T, s objstore.Store) {
	const writers = 8
	ctx := context.Background()
	b := NewBucket(t, s)
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			size := int64(len(version(i)))
			if i%2 == 1 {
				size = objstore.SizeUnknown
			}
			errs[i] = s.Put(ctx, b, "same", bytes.NewReader(version(i)), size)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Put by writer %d: %v", i, err)
		}
	}
	if err := checkVersion(mustGet(t, s, b, "same"), writers); err != nil {
		t.Fatal(err)
	}
	if keys := collect(t, s, b, ""); len(keys) != 1 {
		t.Fatalf("bucket holds %v, want only the key \"same\"", keys)
	}
}

func testReadsDuringOverwrite(t *testing.T, s objstore.Store) {
	const writers, rounds = 3, 10
	b := NewBucket(t, s)
	put(t, s, b, "hot", version(0))
	ctx := context.Background()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for range rounds {
				if err := s.Put(ctx, b, "hot", bytes.NewReader(version(w)), int64(len(version(w)))); err != nil {
					t.Errorf("Put: %v", err)
					return
				}
			}
		})
	}
	var reads int
	var readErr error
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			data, err := get(s, b, "hot")
			if err == nil {
				err = checkVersion(data, writers)
			}
			if err != nil {
				readErr = err
				return
			}
			reads++
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	wg.Wait()
	close(done)
	<-readerDone
	if readErr != nil {
		t.Fatalf("a read during overwrites (after %d good reads): %v", reads, readErr)
	}
	if reads == 0 {
		t.Fatal("no read completed")
	}
}

func testBucketIsolation(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	b1, b2 := NewBucket(t, s), NewBucket(t, s)
	put(t, s, b1, "chunks/x", []byte("one"))
	put(t, s, b2, "chunks/x", []byte("two-two"))
	if got := mustGet(t, s, b1, "chunks/x"); string(got) != "one" {
		t.Fatalf("bucket 1 holds %q", got)
	}
	if got := mustGet(t, s, b2, "chunks/x"); string(got) != "two-two" {
		t.Fatalf("bucket 2 holds %q", got)
	}
	if err := s.Delete(ctx, b1, "chunks/x"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := s.Stat(ctx, b1, "chunks/x")
	wantErr(t, "Stat in bucket 1 after delete", err, objstore.ErrNotFound)
	if got := mustGet(t, s, b2, "chunks/x"); string(got) != "two-two" {
		t.Fatalf("deleting in bucket 1 changed bucket 2: %q", got)
	}
	if keys := slices.Sorted(maps.Keys(collect(t, s, b1, ""))); len(keys) != 0 {
		t.Fatalf("bucket 1 still lists %v", keys)
	}
}
