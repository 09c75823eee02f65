package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/platinum-dev/platinum/internal/secrets"
	"github.com/platinum-dev/platinum/internal/store"
)

// keyStore is what platformKey needs of the store: the fingerprints of the
// platform's keys.
type keyStore interface {
	GetKeyFingerprint(ctx context.Context, name string) (store.KeyFingerprint, error)
	RecordKeyFingerprint(ctx context.Context, f store.KeyFingerprint) (store.KeyFingerprint, error)
}

// platformKey is the platform's key named name ("secrets.key" or
// "preview.key"): the one a joined host took from the platform (joined),
// else the data dir's file, made on first use. On a PostgreSQL store,
// which ptd processes share directly, the file must be the platform's:
// the store keeps a fingerprint of the platform's key (recorded by the
// first ptd to start on it), and a ptd whose file differs, or that has
// none while the platform has a key, refuses to start rather than seal or
// sign with a key of its own (docs/ARCHITECTURE.md, "Many hosts"). A
// SQLite store is one ptd's (hosts join it), so its key is unchecked.
func platformKey(ctx context.Context, cfg config, st keyStore, joined []byte, name string) ([]byte, error) {
	if joined != nil {
		return joined, nil
	}
	path := filepath.Join(cfg.dataDir, name)
	if cfg.store.kind != "postgres" {
		return secrets.LoadOrCreateKey(path)
	}
	return sharedKey(ctx, st, path, name)
}

// sharedKey is the key at path when its fingerprint is the one st records
// as name, recording it first when st has none. Two ptds starting together
// on a new store both try to record theirs: one wins, and the other
// removes the key it just made and refuses, naming the winner's data dir.
func sharedKey(ctx context.Context, st keyStore, path, name string) ([]byte, error) {
	rec, err := st.GetKeyFingerprint(ctx, name)
	switch {
	case err == nil:
		key, err := secrets.LoadKey(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, keyRefusal(rec, path, false)
		}
		if err != nil {
			return nil, err
		}
		if secrets.Fingerprint(key) != rec.Fingerprint {
			return nil, keyRefusal(rec, path, true)
		}
		return key, nil
	case !errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("%s: the platform's key fingerprint: %w", name, err)
	}
	_, statErr := os.Stat(path)
	made := errors.Is(statErr, fs.ErrNotExist)
	key, err := secrets.LoadOrCreateKey(path)
	if err != nil {
		return nil, err
	}
	fp := secrets.Fingerprint(key)
	rec, err = st.RecordKeyFingerprint(ctx, store.KeyFingerprint{Name: name, Fingerprint: fp, Origin: keyOrigin(path)})
	if err == nil && rec.Fingerprint == fp {
		return key, nil
	}
	if made {
		// Nothing was sealed with it: the next start must find no key of
		// its own, not this one.
		os.Remove(path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: recording the platform's key fingerprint: %w", name, err)
	}
	return nil, keyRefusal(rec, path, !made)
}

// keyOrigin names where the key at path lives, for an operator to copy it
// from: the data dir and this machine's name ("/var/lib/platinum on m1").
func keyOrigin(path string) string {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		dir = filepath.Dir(path)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return dir
	}
	return dir + " on " + host
}

// keyRefusal says why a ptd may not start with the key at path (it has
// one that differs, or none) and what to do.
func keyRefusal(rec store.KeyFingerprint, path string, differs bool) error {
	dir := filepath.Dir(path)
	what := fmt.Sprintf("%s has no %s", dir, rec.Name)
	if differs {
		what = fmt.Sprintf("%s is not the platform's %s", path, rec.Name)
	}
	return fmt.Errorf("%s: the ptd processes sharing this store use the %s first recorded from the data dir %s (%s); "+
		"copy secrets.key and preview.key from that data dir (or any other data dir of this platform) into %s, keeping mode 0600, and start again; "+
		"or start this ptd without --store, joined to the platform: ptd serve --role=host --join URL (URL: a ptd of this platform started with --host-token, the same token in PT_HOST_TOKEN here)",
		what, rec.Name, rec.Origin, rec.Fingerprint, dir)
}
