package e2e

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// TestStoreBackendE2E: the ptd under test keeps its records in the store
// the run asked for (PT_TEST_STORE), so a suite run "on PostgreSQL" is on
// PostgreSQL: a sandbox created through the API is a row there, and no
// SQLite file appears in the data dir.
func TestStoreBackendE2E(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "busybox")
	r := c.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox"})
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := r.JSON()["id"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
	var n int
	dbFile := filepath.Join(env.dataDir, "platinum.db")
	switch ptdtest.StoreFromEnv() {
	case "postgres":
		if env.storeURL == "" {
			t.Fatal("PT_TEST_STORE=postgres but ptd runs without a PostgreSQL store")
		}
		conn, err := pgx.Connect(t.Context(), env.storeURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(t.Context())
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM sandboxes WHERE id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dbFile); !os.IsNotExist(err) {
			t.Errorf("a ptd on PostgreSQL made %s: %v", dbFile, err)
		}
	default:
		db, err := sql.Open("sqlite", "file:"+dbFile+"?mode=ro&_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.QueryRow(`SELECT count(*) FROM sandboxes WHERE id = ?`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	if n != 1 {
		t.Errorf("sandbox %s: %d rows in the %s store, want 1", id, n, ptdtest.StoreFromEnv())
	}
}
