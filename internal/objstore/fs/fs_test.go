package fs_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/objstore"
	"github.com/platinum-dev/platinum/internal/objstore/fs"
	"github.com/platinum-dev/platinum/internal/objstore/objstoretest"
)

func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		s, err := fs.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// storeWithBucket opens a store in a fresh directory with one bucket and
// returns it and the directory.
func storeWithBucket(t *testing.T, bucket string) (*fs.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := fs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureBucket(context.Background(), bucket); err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func TestLayout(t *testing.T) {
	s, dir := storeWithBucket(t, "archives")
	ctx := context.Background()
	if err := s.Put(ctx, "archives", "chunks/abc", bytes.NewReader([]byte("data")), 4); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "archives", "chunks", "abc"))
	if err != nil || string(got) != "data" {
		t.Fatalf("object file = %q, %v; want \"data\" at <dir>/<bucket>/<key>", got, err)
	}
	tmps, _ := os.ReadDir(filepath.Join(dir, ".tmp"))
	if len(tmps) != 0 {
		t.Fatalf("temporary files left after Put: %v", tmps)
	}
	// Deleting the last object of a directory prunes it.
	if err := s.Delete(ctx, "archives", "chunks/abc"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "archives", "chunks")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty key directory not pruned: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "archives")); err != nil {
		t.Fatalf("bucket directory pruned: %v", err)
	}
}

func TestKeyDirectoryConflict(t *testing.T) {
	s, _ := storeWithBucket(t, "bkt")
	ctx := context.Background()
	if err := s.Put(ctx, "bkt", "a/b", bytes.NewReader(nil), 0); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, key string }{
		{"key is another key's directory", "a"},
		{"key below another key", "a/b/c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Put(ctx, "bkt", tc.key, bytes.NewReader([]byte("x")), 1)
			if !errors.Is(err, objstore.ErrConflict) {
				t.Fatalf("Put(%s) = %v, want ErrConflict", tc.key, err)
			}
		})
	}
}

func TestOpenSweepsStaleTemps(t *testing.T) {
	dir := t.TempDir()
	if _, err := fs.Open(dir); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, ".tmp", "stale")
	fresh := filepath.Join(dir, ".tmp", "fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Open(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temporary file kept: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temporary file (a Put in flight) removed: %v", err)
	}
}

// failingReader fails after a few reads, as a source that dies mid-stream.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n++; r.n > 3 {
		return 0, errors.New("source died")
	}
	return copy(p, bytes.Repeat([]byte("x"), 100)), nil
}

// TestPutFailureLeavesNoTemp: a Put whose reader fails stores nothing and
// removes its temporary file at once (it used to wait a day for Open).
func TestPutFailureLeavesNoTemp(t *testing.T) {
	s, dir := storeWithBucket(t, "bkt")
	ctx := context.Background()
	if err := s.Put(ctx, "bkt", "k", &failingReader{}, -1); err == nil {
		t.Fatal("Put of a failing reader succeeded")
	}
	ents, err := os.ReadDir(filepath.Join(dir, ".tmp"))
	if err != nil || len(ents) != 0 {
		t.Errorf("temporary files after a failed Put: %d (%v)", len(ents), err)
	}
	if _, err := s.Stat(ctx, "bkt", "k"); err == nil {
		t.Error("a failed Put stored the object")
	}
}
