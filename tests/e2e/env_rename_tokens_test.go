package e2e

import (
	"strings"
	"testing"
)

// TestEnvPatch: new commands see a patch at once (removals too), the
// answer names keys only, and /etc/pt-env keeps the boot values until the
// next cold boot, which re-seeds it from the current ones.
func TestEnvPatch(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox", "env": map[string]string{"API_TOKEN": "old-value", "OLD_UNUSED": "x"}})
	if out := c.mustSh(id, ". /etc/pt-env; echo $API_TOKEN"); out != "old-value\n" {
		t.Fatalf("pt-env at boot: %q", out)
	}
	r := c.do("PATCH", "/v1/sandboxes/"+id+"/env", `{"env":{"API_TOKEN":"new-value","OLD_UNUSED":null}}`)
	m := r.JSON()
	if r.Status != 200 || m["applies"] != "next_exec" || strings.Contains(string(r.Body), "new-value") {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	if out := c.mustSh(id, `echo "$API_TOKEN/${OLD_UNUSED-unset}"`); out != "new-value/unset\n" {
		t.Errorf("exec after patch: %q", out)
	}
	if out := c.mustSh(id, ". /etc/pt-env; echo $API_TOKEN"); out != "old-value\n" {
		t.Errorf("pt-env changed before a cold boot: %q", out)
	}
	c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped&memory=false", nil)
	r = c.do("PATCH", "/v1/sandboxes/"+id+"/env", `{"env":{"LATER":"1"}}`)
	if r.JSON()["applies"] != "next_start" {
		t.Errorf("patch while stopped: %s", r.Body)
	}
	if r := c.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil); r.JSON()["restore"] != "disk_only" {
		t.Fatalf("cold start: %s", r.Body)
	}
	if out := c.mustSh(id, `. /etc/pt-env; echo "$API_TOKEN $LATER ${OLD_UNUSED-unset}"`); out != "new-value 1 unset\n" {
		t.Errorf("pt-env after cold boot: %q", out)
	}
	// Bad patches change nothing.
	big := strings.Repeat("x", 129*1024)
	if r := c.do("PATCH", "/v1/sandboxes/"+id+"/env", `{"env":{"HUGE":"`+big+`"}}`); r.Status != 400 || r.JSON()["code"] != "env_var_too_large" {
		t.Errorf("huge var: %d %s", r.Status, r.Body[:min(len(r.Body), 200)])
	}
	val := strings.Repeat("y", 100*1024)
	body := `{"env":{"A":"` + val + `","B":"` + val + `","C":"` + val + `"}}`
	if r := c.do("PATCH", "/v1/sandboxes/"+id+"/env", body); r.Status != 413 || r.JSON()["code"] != "env_too_large" {
		t.Errorf("too large total: %d", r.Status)
	}
	if out := c.mustSh(id, `echo "${A-unset}"`); out != "unset\n" {
		t.Errorf("a refused patch applied: %q", out)
	}
	// List never carries values.
	if r := c.do("GET", "/v1/sandboxes?limit=200", nil); strings.Contains(string(r.Body), "new-value") {
		t.Error("list leaks env values")
	}
}

func TestRenameAndParentChild(t *testing.T) {
	c := newClient(t)
	parent := c.create(map[string]any{"template": "busybox", "name": "parent-" + randHex(3)})
	r := c.do("PATCH", "/v1/sandboxes/"+parent, `{"name":"ci-runner-2-`+parent[len(parent)-4:]+`"}`)
	if r.Status != 200 || !strings.HasPrefix(r.JSON()["name"].(string), "ci-runner-2") {
		t.Fatalf("rename: %d %s", r.Status, r.Body)
	}
	if r := c.do("PATCH", "/v1/sandboxes/"+parent, `{"name":null}`); r.Status != 200 || r.JSON()["name"] != nil {
		t.Errorf("clear name: %d %s", r.Status, r.Body)
	}
	child := c.create(map[string]any{"template": "busybox", "parent_id": parent})
	if r := c.do("GET", "/v1/sandboxes/"+parent+"/children", nil); !strings.Contains(string(r.Body), child) {
		t.Errorf("children: %s", r.Body)
	}
	if r := c.do("GET", "/v1/sandboxes?parent_id="+parent, nil); !strings.Contains(string(r.Body), child) || strings.Contains(string(r.Body), `"id":"`+parent) {
		t.Errorf("list by parent: %s", r.Body)
	}
	if r := c.do("GET", "/v1/sandboxes?parent_id=none&limit=200", nil); strings.Contains(string(r.Body), `"id":"`+child) {
		t.Errorf("roots list has the child: %s", r.Body)
	}
	r = c.do("DELETE", "/v1/sandboxes/"+parent, nil)
	if r.Status != 409 || !strings.Contains(string(r.Body), child) {
		t.Errorf("delete parent with a live child: %d %s", r.Status, r.Body)
	}
	if r := c.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox", "parent_id": "sbx_01KZZZZZZZZZZZZZZZZZZZZZZZ"}); r.Status != 404 {
		t.Errorf("missing parent: %d %s", r.Status, r.Body)
	}
	c.do("DELETE", "/v1/sandboxes/"+child, nil)
	waitState(t, c, child, "deleted")
	if r := c.do("DELETE", "/v1/sandboxes/"+parent, nil); r.Status != 202 {
		t.Errorf("delete parent after child: %d %s", r.Status, r.Body)
	}
}

// TestSandboxScopedToken: a sandbox's processes get PT_API_URL and a
// token that manages only that sandbox's children; everything else is 404.
func TestSandboxScopedToken(t *testing.T) {
	c := newClient(t)
	parent := c.create(map[string]any{"template": "busybox"})
	other := c.create(map[string]any{"template": "busybox"})
	wget := `wget -qO- --header "Authorization: Bearer $PT_TOKEN" `
	if out := c.mustSh(parent, `echo "$PT_API_URL" | grep -q '^http://' && echo ok`); out != "ok\n" {
		t.Fatal("no PT_API_URL inside the sandbox")
	}
	if out := c.mustSh(parent, wget+`"$PT_API_URL/v1/sandboxes"`); strings.Contains(out, other) || strings.Contains(out, parent) {
		t.Errorf("sandbox token lists non-children: %s", out)
	}
	out := c.mustSh(parent, wget+`--header "Content-Type: application/json" --post-data '{"template":"busybox"}' "$PT_API_URL/v1/sandboxes?wait_for_state=running"`)
	if !strings.Contains(out, `"parent_id":"`+parent+`"`) || !strings.Contains(out, `"state":"running"`) {
		t.Fatalf("child created from inside: %s", out)
	}
	child := out[strings.Index(out, `"id":"`)+6:]
	child = child[:strings.Index(child, `"`)]
	t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+child, nil) })
	if out := c.mustSh(parent, wget+`"$PT_API_URL/v1/sandboxes/`+child+`"`); !strings.Contains(out, child) {
		t.Errorf("get own child: %s", out)
	}
	for _, id := range []string{other, parent} {
		res := c.sh(parent, wget+`"$PT_API_URL/v1/sandboxes/`+id+`"`)
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "404") {
			t.Errorf("sandbox token reached %s: %+v", id, res)
		}
	}
	// The admin's view: the child is the parent's.
	if r := c.do("GET", "/v1/sandboxes/"+parent+"/children", nil); !strings.Contains(string(r.Body), child) {
		t.Errorf("children: %s", r.Body)
	}
}
