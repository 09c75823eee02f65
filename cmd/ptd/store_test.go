package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/platinum-dev/platinum/internal/pgtest"
	"github.com/platinum-dev/platinum/internal/store"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestOpenStore opens each kind --store names and round-trips a record:
// the default really is SQLite in the data dir, and a postgres URL
// really reaches PostgreSQL.
func TestOpenStore(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		arg  func(t *testing.T) string
		file string // the SQLite file the store must have made
	}{
		{"default", func(*testing.T) string { return "" }, filepath.Join(dir, "platinum.db")},
		{"sqlite path", func(*testing.T) string { return filepath.Join(dir, "other.db") }, filepath.Join(dir, "other.db")},
		{"postgres", func(t *testing.T) string { return pgtest.NewDatabase(t) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseStore(tc.arg(t), dir)
			if err != nil {
				t.Fatal(err)
			}
			st, err := openStore(t.Context(), f, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.CreateOrg(t.Context(), store.Org{ID: "org_" + f.kind, Name: tc.name}); err != nil {
				t.Fatal(err)
			}
			if o, err := st.GetOrg(t.Context(), "org_"+f.kind); err != nil || o.Name != tc.name {
				t.Fatalf("GetOrg = %+v, %v", o, err)
			}
			if tc.file != "" {
				b, err := os.ReadFile(tc.file)
				if err != nil || len(b) < 16 || string(b[:16]) != "SQLite format 3\x00" {
					t.Errorf("no SQLite database at %s: %v", tc.file, err)
				}
			}
		})
	}
}
