package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/storetest"
)

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "platinum.db"), nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
}

func TestOpenPragmas(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	tests := []struct {
		db     *sql.DB
		pragma string
		want   string
	}{
		{s.w, "journal_mode", "wal"},
		{s.w, "foreign_keys", "1"},
		{s.w, "busy_timeout", fmt.Sprint(busyTimeoutMS)},
		{s.r, "foreign_keys", "1"},
		{s.r, "busy_timeout", fmt.Sprint(busyTimeoutMS)},
		{s.r, "query_only", "1"},
		{s.w, "query_only", "0"},
	}
	for _, tc := range tests {
		var got string
		if err := tc.db.QueryRowContext(ctx, "PRAGMA "+tc.pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", tc.pragma, err)
		}
		if got != tc.want {
			t.Errorf("PRAGMA %s = %q, want %q", tc.pragma, got, tc.want)
		}
	}
}

func TestOpenRejectsNonFilePaths(t *testing.T) {
	for _, path := range []string{"", ":memory:", "file:x.db", "x.db?mode=ro"} {
		if s, err := Open(t.Context(), path, nil); !errors.Is(err, sandbox.ErrInvalidArgument) {
			if s != nil {
				s.Close()
			}
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument", path, err)
		}
	}
}

func TestReopenKeepsDataAndMigrations(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "platinum.db")
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.CreateOrg(ctx, store.Org{ID: "org_keep", Name: "keep"}); err != nil {
		t.Fatalf("CreateOrg: %v", err)
	}
	first := appliedMigrations(t, s)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s, err = Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if _, err := s.GetOrg(ctx, "org_keep"); err != nil {
		t.Errorf("GetOrg after reopen: %v", err)
	}
	if diff := cmp.Diff(first, appliedMigrations(t, s)); diff != "" {
		t.Errorf("reopen changed schema_migrations (-before +after):\n%s", diff)
	}
	ms, err := loadMigrations(mustSub(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != len(ms) {
		t.Errorf("%d migrations recorded, %d embedded", len(first), len(ms))
	}
}

// appliedMigrations lists schema_migrations as "version name applied_at".
func appliedMigrations(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.r.QueryContext(t.Context(), `SELECT version, name, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatalf("schema_migrations: %v", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v int
		var name, at string
		if err := rows.Scan(&v, &name, &at); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(v, " ", name, " ", at))
	}
	return out
}

func TestMigrateAppliesOnlyNew(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := Open(ctx, path, nil) // real schema first
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// Re-running 0001 would fail (CREATE TABLE without IF NOT EXISTS), so
	// success proves only the new files ran.
	v1 := fstest.MapFS{}
	entries, _ := fs.ReadDir(migrationFS, "migrations")
	for _, e := range entries {
		v1[e.Name()] = &fstest.MapFile{Data: mustRead(t, "migrations/"+e.Name())}
	}
	v2 := fstest.MapFS{
		"9001_extra.sql": {Data: []byte("CREATE TABLE extra (id TEXT PRIMARY KEY) STRICT;\nINSERT INTO extra VALUES ('a');")},
		"9002_more.sql":  {Data: []byte("INSERT INTO extra VALUES ('b');")},
		"README":         {Data: []byte("ignored: not .sql")},
	}
	for k, v := range v1 {
		v2[k] = v
	}
	if err := migrate(ctx, s.w, v1, s.logger); err != nil {
		t.Fatalf("migrate v1 again: %v", err)
	}
	if err := migrate(ctx, s.w, v2, s.logger); err != nil {
		t.Fatalf("migrate v2: %v", err)
	}
	if err := migrate(ctx, s.w, v2, s.logger); err != nil {
		t.Fatalf("migrate v2 again: %v", err)
	}
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM extra`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("extra has %d rows, want 2 (each migration exactly once)", n)
	}

	// The embedded set no longer knows 0002/0003: the database is newer
	// than this binary, and Open must refuse it.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(ctx, path, nil); err == nil {
		s2.Close()
		t.Error("Open of a database with unknown migrations succeeded")
	}
}

func TestMigrateFailureRollsBack(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t)
	before := appliedMigrations(t, s)
	bad := fstest.MapFS{
		"9001_ok.sql":  {Data: []byte("CREATE TABLE ok (id TEXT) STRICT;")},
		"9002_bad.sql": {Data: []byte("CREATE TABLE broken (;")},
	}
	entries, _ := fs.ReadDir(migrationFS, "migrations")
	for _, e := range entries {
		bad[e.Name()] = &fstest.MapFile{Data: mustRead(t, "migrations/"+e.Name())}
	}
	if err := migrate(ctx, s.w, bad, s.logger); err == nil {
		t.Fatal("migrate with a broken file succeeded")
	}
	if diff := cmp.Diff(before, appliedMigrations(t, s)); diff != "" {
		t.Errorf("failed migrate recorded versions (-before +after):\n%s", diff)
	}
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = 'ok'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Error("table from 9001 exists after the batch failed")
	}
}

func TestLoadMigrationsRejectsBadNames(t *testing.T) {
	tests := map[string]fstest.MapFS{
		"no number":     {"init.sql": {}},
		"zero":          {"0000_init.sql": {}},
		"duplicate":     {"0001_a.sql": {}, "01_b.sql": {}},
		"no underscore": {"0001.sql": {}},
	}
	for name, fsys := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := loadMigrations(fsys); err == nil {
				t.Error("loadMigrations accepted it")
			}
		})
	}
}

// TestTwoStoresOneFile has two Stores (as two processes would) update the
// same rows: cross-connection locking must be handled by BEGIN IMMEDIATE and
// busy_timeout, surfacing only ErrConflict, never SQLITE_BUSY.
func TestTwoStoresOneFile(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "shared.db")
	var stores []*Store
	for range 2 {
		s, err := Open(ctx, path, nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	sb := sandbox.Sandbox{ID: sandbox.NewID(sandbox.PrefixSandbox), OrgID: "org_a", State: sandbox.StateRunning}
	if err := stores[0].CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 20, 5
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[g%2]
			for i := 0; i < each; {
				cur, err := s.GetSandbox(ctx, "", sb.ID)
				if err != nil {
					errs <- err
					return
				}
				cur.Name = fmt.Sprint(g)
				if _, err := s.UpdateSandbox(ctx, cur); err == nil {
					i++
				} else if !errors.Is(err, store.ErrConflict) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := stores[1].GetSandbox(ctx, "", sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 1+goroutines*each {
		t.Errorf("version %d, want %d", got.Version, 1+goroutines*each)
	}
}

func TestCancelledContext(t *testing.T) {
	s := openTemp(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.CreateOrg(ctx, store.Org{ID: "org_x"}); err == nil {
		t.Error("CreateOrg with a cancelled context succeeded")
	}
	if _, err := s.GetOrg(t.Context(), "org_x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetOrg after cancelled create: %v, want ErrNotFound", err)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := migrationFS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustSub(t *testing.T) fstest.MapFS {
	t.Helper()
	entries, err := migrationFS.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	m := fstest.MapFS{}
	for _, e := range entries {
		m[e.Name()] = &fstest.MapFile{Data: mustRead(t, "migrations/"+e.Name())}
	}
	return m
}
