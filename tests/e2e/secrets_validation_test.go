package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsValidationAndAtRest: bad secrets are 400 invalid_request
// (field secrets) and create nothing; the sealing key lives in the data
// dir, readable by root only; a value reaches no endpoint that shows the
// sandbox (children, events, usage) nor ptd's log.
func TestSecretsValidationAndAtRest(t *testing.T) {
	c := newClient(t)
	total := func() any { return c.do("GET", "/v1/sandboxes?paginated=true&limit=1", nil).JSON()["total"] }
	before := total()
	many := map[string]any{}
	for i := range 65 {
		many[fmt.Sprintf("S%d", i)] = "v"
	}
	for _, tc := range []struct {
		name    string
		secrets any
	}{
		{"name with a dash", map[string]any{"BAD-NAME": "v"}},
		{"name starting with a digit", map[string]any{"1KEY": "v"}},
		{"empty value", map[string]any{"KEY": ""}},
		{"value over 64 KiB", map[string]any{"KEY": strings.Repeat("v", 64*1024+1)}},
		{"more than 64 secrets", many},
		{"host that is not a name", map[string]any{"KEY": map[string]any{"value": "v", "hosts": []string{"http://x/"}}}},
		{"not a string or object", map[string]any{"KEY": 5}},
		{"unknown field", map[string]any{"KEY": map[string]any{"value": "v", "extra": true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox", "secrets": tc.secrets})
			if m := r.JSON(); r.Status != 400 || m["code"] != "invalid_request" {
				t.Errorf("%d %.300s", r.Status, r.Body)
			} else if f, _ := m["field"].(string); !strings.HasPrefix(f, "secrets") {
				t.Errorf("field %q, want secrets", f)
			}
		})
	}
	if after := total(); after != before {
		t.Errorf("refused creates made sandboxes: total %v → %v", before, after)
	}
	fi, err := os.Stat(filepath.Join(env.dataDir, "secrets.key"))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() == 0 {
		t.Errorf("secrets.key in the data dir: %v %v", fi, err)
	}
	value := "sk-test-" + randHex(12)
	parent := c.create(map[string]any{"template": "busybox"})
	r := c.do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": "busybox", "parent_id": parent, "secrets": map[string]any{"TOKEN": value}})
	if r.Status != 201 {
		t.Fatalf("child with a secret: %d %s", r.Status, r.Body)
	}
	child := r.JSON()["id"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+child, nil) })
	bodies := [][]byte{r.Body}
	for _, path := range []string{
		"/v1/sandboxes/" + parent + "/children",
		"/v1/sandboxes?parent_id=" + parent,
		"/v1/events?format=json&sandbox_id=" + child,
		"/v1/sandboxes/" + child + "/usage",
		"/v1/sandboxes/" + child + "?include_deleted=true",
	} {
		r := c.do("GET", path, nil)
		if r.Status != 200 {
			t.Errorf("GET %s: %d %s", path, r.Status, r.Body)
		}
		bodies = append(bodies, r.Body)
	}
	if !bytes.Contains(bodies[1], []byte(`"secret_names":["TOKEN"]`)) {
		t.Errorf("child list lacks secret_names: %s", bodies[1])
	}
	logs, _ := os.ReadFile(filepath.Join(env.binDir, "ptd.log"))
	for i, b := range append(bodies, logs) {
		if bytes.Contains(b, []byte(value)) {
			t.Errorf("answer %d (or the log) carries the secret's value", i)
		}
	}
}
