package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/platinum-dev/platinum/internal/pgtest"
	"github.com/platinum-dev/platinum/internal/secrets"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/postgres"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
)

// TestPlatformKeyOnASharedStore runs platformKey for ptds sharing one
// PostgreSQL store: the first records its keys' fingerprints (not the
// keys), a fresh data dir and one with keys of its own are refused with
// what to do, and copied keys are taken. A SQLite store records nothing.
func TestPlatformKeyOnASharedStore(t *testing.T) {
	ctx := t.Context()
	st, err := postgres.Open(ctx, pgtest.NewDatabase(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfgOf := func(dir string) config {
		return config{dataDir: dir, store: storeFlag{kind: "postgres", target: "postgres://x"}}
	}
	first := t.TempDir()
	keys := map[string][]byte{}
	for _, name := range []string{"secrets.key", "preview.key"} {
		key, err := platformKey(ctx, cfgOf(first), st, nil, name)
		if err != nil {
			t.Fatalf("first ptd's %s: %v", name, err)
		}
		keys[name] = key
		rec, err := st.GetKeyFingerprint(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Fingerprint != secrets.Fingerprint(key) || !strings.HasPrefix(rec.Origin, first+" on ") {
			t.Fatalf("recorded %+v for %s in %s", rec, name, first)
		}
		if strings.Contains(rec.Fingerprint, string(key)) || bytes.Contains([]byte(rec.Fingerprint+rec.Origin), key) {
			t.Fatalf("the store holds the key itself: %+v", rec)
		}
		// The first ptd again: its own key.
		again, err := platformKey(ctx, cfgOf(first), st, nil, name)
		if err != nil || !bytes.Equal(again, key) {
			t.Fatalf("first ptd restarted: %v (same key %v)", err, bytes.Equal(again, key))
		}
	}

	// A fresh data dir is refused and gets no key of its own.
	fresh := t.TempDir()
	_, err = platformKey(ctx, cfgOf(fresh), st, nil, "secrets.key")
	wantRefusal(t, err, fresh+" has no secrets.key", first)
	if _, err := os.Stat(filepath.Join(fresh, "secrets.key")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused ptd made a key: %v", err)
	}
	// A data dir with keys of its own is refused.
	other := t.TempDir()
	if _, err := secrets.LoadOrCreateKey(filepath.Join(other, "preview.key")); err != nil {
		t.Fatal(err)
	}
	_, err = platformKey(ctx, cfgOf(other), st, nil, "preview.key")
	wantRefusal(t, err, filepath.Join(other, "preview.key")+" is not the platform's preview.key", first)
	// Copied, the platform's keys are taken.
	for name, key := range keys {
		if err := os.WriteFile(filepath.Join(fresh, name), key, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := platformKey(ctx, cfgOf(fresh), st, nil, name)
		if err != nil || !bytes.Equal(got, key) {
			t.Fatalf("copied %s: %v (same key %v)", name, err, bytes.Equal(got, key))
		}
	}
	// A joined host's key is the platform's as given.
	if got, err := platformKey(ctx, cfgOf(t.TempDir()), st, keys["secrets.key"], "secrets.key"); err != nil || !bytes.Equal(got, keys["secrets.key"]) {
		t.Fatalf("joined key: %v", err)
	}

	// A SQLite store is one ptd's: its key is made and nothing recorded.
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "platinum.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	dir := t.TempDir()
	if _, err := platformKey(ctx, config{dataDir: dir, store: storeFlag{kind: "sqlite"}}, lite, nil, "secrets.key"); err != nil {
		t.Fatal(err)
	}
	if _, err := lite.GetKeyFingerprint(ctx, "secrets.key"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SQLite recorded a fingerprint: %v", err)
	}
}

// TestPlatformKeyStartedTogether starts ptds with fresh data dirs on a new
// store at once: one records its key, every other is refused and keeps no
// key of its own.
func TestPlatformKeyStartedTogether(t *testing.T) {
	ctx := t.Context()
	st, err := postgres.Open(ctx, pgtest.NewDatabase(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dirs := make([]string, 6)
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i := range dirs {
		dirs[i] = t.TempDir()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = platformKey(ctx, config{dataDir: dirs[i], store: storeFlag{kind: "postgres"}}, st, nil, "secrets.key")
		}()
	}
	wg.Wait()
	rec, err := st.GetKeyFingerprint(ctx, "secrets.key")
	if err != nil {
		t.Fatal(err)
	}
	started := 0
	for i, err := range errs {
		_, statErr := os.Stat(filepath.Join(dirs[i], "secrets.key"))
		if err == nil {
			started++
			if !strings.HasPrefix(rec.Origin, dirs[i]+" on ") || statErr != nil {
				t.Errorf("ptd %d started, but the record names %s (its key: %v)", i, rec.Origin, statErr)
			}
			continue
		}
		wantRefusal(t, err, dirs[i]+" has no secrets.key", rec.Origin)
		if !errors.Is(statErr, fs.ErrNotExist) {
			t.Errorf("refused ptd %d kept a key: %v", i, statErr)
		}
	}
	if started != 1 {
		t.Fatalf("%d ptds started with keys of their own, want 1", started)
	}
}

// wantRefusal checks err refuses the start saying what, naming the data
// dir to copy the keys from and the other way in.
func wantRefusal(t *testing.T, err error, what, from string) {
	t.Helper()
	if err == nil {
		t.Fatalf("started; want refused: %s", what)
	}
	for _, s := range []string{what, from, "copy secrets.key and preview.key from that data dir", "--role=host --join URL"} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("refusal %q does not say %q", err, s)
		}
	}
}
