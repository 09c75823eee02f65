package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestSecretsNeverLeak: a secret's value appears in no API answer, no log
// line and not in the store file; the sandbox sees only a placeholder.
func TestSecretsNeverLeak(t *testing.T) {
	c := newClient(t)
	value := "sk-live-" + randHex(12)
	r := c.do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": "busybox",
		"secrets": map[string]any{"API_KEY": value, "GH": map[string]any{"value": value + "-gh", "hosts": []string{"api.github.com"}}}})
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := r.JSON()["id"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
	bodies := [][]byte{r.Body}
	bodies = append(bodies, c.do("GET", "/v1/sandboxes/"+id, nil).Body, c.do("GET", "/v1/sandboxes?limit=200", nil).Body)
	if !strings.Contains(string(bodies[1]), `"secret_names":["API_KEY","GH"]`) {
		t.Errorf("secret names missing: %s", bodies[1])
	}
	out := c.mustSh(id, "echo $API_KEY; cat /etc/pt-env; cat /proc/1/environ | tr '\\0' '\\n'")
	if !strings.HasPrefix(out, "pt_secret_") {
		t.Errorf("sandbox env holds %q, want a placeholder", strings.SplitN(out, "\n", 2)[0])
	}
	bodies = append(bodies, []byte(out))
	for _, b := range bodies {
		if bytes.Contains(b, []byte(value)) {
			t.Fatalf("a secret value leaked: %s", b)
		}
	}
	for _, f := range []string{filepath.Join(env.dataDir, "platinum.db"), filepath.Join(env.dataDir, "platinum.db-wal"), filepath.Join(env.binDir, "ptd.log")} {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(value)) {
			t.Errorf("%s holds a secret value in the clear", f)
		}
	}
	if env.storeURL != "" {
		if table := pgTableHolding(t, value); table != "" {
			t.Errorf("the PostgreSQL store's %s table holds a secret value in the clear", table)
		}
	}
	if r := c.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox", "secrets": map[string]any{"X": map[string]any{"val": 1}}}); r.Status != 400 {
		t.Errorf("malformed secret: %d %s", r.Status, r.Body)
	}
}

// pgTableHolding returns the first table of ptd's PostgreSQL store with a
// row whose text holds s ("" if none): the store's equivalent of reading
// the SQLite file.
func pgTableHolding(t *testing.T, s string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), env.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	rows, err := conn.Query(t.Context(), `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		var n int
		q := `SELECT count(*) FROM ` + pgx.Identifier{table}.Sanitize() + ` r WHERE strpos(to_jsonb(r)::text, $1) > 0`
		if err := conn.QueryRow(t.Context(), q, s).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return table
		}
	}
	return ""
}
