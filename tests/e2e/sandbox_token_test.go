package e2e

import (
	"slices"
	"strings"
	"testing"
)

// TestSandboxTokenManagesOnlyItsChildren: the PT_TOKEN a sandbox gets
// creates, lists and manages its own children and reaches nothing else:
// its own record, a sibling and a stranger are 404 on every route.
func TestSandboxTokenManagesOnlyItsChildren(t *testing.T) {
	admin := newClient(t)
	parent := admin.create(map[string]any{"template": "busybox"})
	other := admin.create(map[string]any{"template": "busybox"})
	sibling := admin.create(map[string]any{"template": "busybox", "parent_id": other})
	tok := strings.TrimSpace(admin.mustSh(parent, "echo $PT_TOKEN"))
	if tok == "" || tok == env.token {
		t.Fatalf("the sandbox's PT_TOKEN is %q", tok)
	}
	sbx := &client{t: t, token: tok}
	r := sbx.do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": "busybox"})
	if r.Status != 201 || r.JSON()["parent_id"] != parent {
		t.Fatalf("create a child: %d %s", r.Status, r.Body)
	}
	child := r.JSON()["id"].(string)
	t.Cleanup(func() { admin.do("DELETE", "/v1/sandboxes/"+child, nil) })
	if ids := rowIDs(sbx.do("GET", "/v1/sandboxes?limit=200&paginated=true", nil).JSON()); !slices.Equal(ids, []string{child}) {
		t.Errorf("list with the sandbox token: %v, want [%s]", ids, child)
	}
	for _, id := range []string{parent, other, sibling} {
		for _, tc := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/v1/sandboxes/" + id, nil},
			{"PATCH", "/v1/sandboxes/" + id, map[string]any{"name": "taken-over"}},
			{"PATCH", "/v1/sandboxes/" + id + "/env", map[string]any{"env": map[string]any{"X": "1"}}},
			{"POST", "/v1/sandboxes/" + id + "/exec", map[string]any{"cmd": "true"}},
			{"POST", "/v1/sandboxes/" + id + "/resize", map[string]any{"cpu": 1}},
			{"GET", "/v1/sandboxes/" + id + "/metrics", nil},
			{"GET", "/v1/sandboxes/" + id + "/usage", nil},
			{"GET", "/v1/sandboxes/" + id + "/children", nil},
			{"POST", "/v1/sandboxes/" + id + "/stop", nil},
			{"DELETE", "/v1/sandboxes/" + id, nil},
		} {
			if r := sbx.do(tc.method, tc.path, tc.body); r.Status != 404 || r.JSON()["code"] != "not_found" {
				t.Errorf("%s %s (%s) with the sandbox token: %d %s", tc.method, tc.path, id, r.Status, r.Body)
			}
		}
	}
	// It creates children of its own only (naming itself as the parent is
	// the default).
	for _, id := range []string{other, sibling} {
		if r := sbx.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox", "parent_id": id}); r.Status != 404 || r.JSON()["code"] != "not_found" {
			t.Errorf("create under %s with the sandbox token: %d %s", id, r.Status, r.Body)
		}
	}
	if st := admin.do("GET", "/v1/sandboxes/"+other, nil).JSON()["state"]; st != "running" {
		t.Errorf("the stranger is %v after the refused calls", st)
	}
	// Its own child it manages.
	for _, tc := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"PATCH", "/v1/sandboxes/" + child, map[string]any{"name": "kid-" + randHex(3)}, 200},
		{"PATCH", "/v1/sandboxes/" + child + "/env", map[string]any{"env": map[string]any{"X": "1"}}, 200},
		{"POST", "/v1/sandboxes/" + child + "/exec", map[string]any{"cmd": "true"}, 200},
		{"GET", "/v1/sandboxes/" + child + "/usage", nil, 200},
		{"POST", "/v1/sandboxes/" + child + "/stop?wait_for_state=stopped", nil, 200},
		{"DELETE", "/v1/sandboxes/" + child, nil, 202},
	} {
		if r := sbx.do(tc.method, tc.path, tc.body); r.Status != tc.want {
			t.Errorf("%s %s on its own child: %d %s, want %d", tc.method, tc.path, r.Status, r.Body, tc.want)
		}
	}
}
