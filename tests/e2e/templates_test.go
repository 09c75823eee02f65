package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// lowerDir returns the template rootfs the sandbox's overlay mounts.
func lowerDir(t *testing.T, id string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, "/sandboxes/"+id+"/rootfs") {
			continue
		}
		for _, opt := range strings.Split(line, ",") {
			if v, ok := strings.CutPrefix(opt, "lowerdir="); ok {
				return v
			}
		}
	}
	t.Fatalf("no overlay mount for %s", id)
	return ""
}

type versionJSON struct {
	ID      string `json:"id"`
	Slug    string `json:"slug"`
	Version int    `json:"version"`
	Status  string `json:"status"`
}

func versions(t *testing.T, c *client, slug string) []versionJSON {
	t.Helper()
	return listOf[versionJSON](t, c, "versions", "/v1/templates/"+slug+"/versions")
}

// TestTemplateVersions: a new build of a slug makes a new version; a
// sandbox created on the old one keeps its rootfs; new creates get the new
// one; pinning the old one with template_version_id still works.
func TestTemplateVersions(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "busybox")
	old := c.create(map[string]any{"template": "busybox"})
	oldSb := decodeSandbox(t, c.do("GET", "/v1/sandboxes/"+old, nil))
	v1 := *oldSb.TemplateVersionID
	if oldSb.TemplateSlug != "busybox" || oldSb.TemplateVersion == nil {
		t.Errorf("template fields: %+v", oldSb)
	}
	if !strings.Contains(lowerDir(t, old), v1) {
		t.Fatalf("sandbox mounts %s, want version %s", lowerDir(t, old), v1)
	}

	r := c.do("POST", "/v1/templates/busybox/builds", nil)
	if r.Status != 202 {
		t.Fatalf("new build: %d %s", r.Status, r.Body)
	}
	var v2 versionJSON
	json.Unmarshal(r.Body, &v2)
	if v2.ID == v1 || !strings.HasPrefix(v2.ID, "tplv_") || v2.Slug != "busybox" {
		t.Fatalf("new build answered %s, want a new version", r.Body)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		vs := versions(t, c, "busybox")
		if len(vs) >= 2 && vs[0].ID == v2.ID && vs[0].Status == "ready" {
			if vs[0].Version <= vs[1].Version {
				t.Errorf("versions not numbered newest first: %+v", vs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("version %s never became ready: %+v", v2.ID, vs)
		}
		sleep(200)
	}

	// The old sandbox keeps v1, and its rootfs.
	if got := decodeSandbox(t, c.do("GET", "/v1/sandboxes/"+old, nil)); *got.TemplateVersionID != v1 {
		t.Errorf("old sandbox moved to %s", *got.TemplateVersionID)
	}
	if !strings.Contains(lowerDir(t, old), v1) {
		t.Errorf("old sandbox now mounts %s, want %s", lowerDir(t, old), v1)
	}
	c.mustSh(old, "true")
	// A cold boot (disk-only stop, then start) boots v1 again.
	if r := c.do("POST", "/v1/sandboxes/"+old+"/stop?memory=false&wait_for_state=stopped&wait_timeout_ms=120000", nil); r.Status != 200 {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
	if r := c.do("POST", "/v1/sandboxes/"+old+"/start?wait_for_state=running&wait_timeout_ms=120000", nil); r.Status != 200 {
		t.Fatalf("start: %d %s", r.Status, r.Body)
	}
	if !strings.Contains(lowerDir(t, old), v1) {
		t.Errorf("after a cold boot the old sandbox mounts %s, want %s", lowerDir(t, old), v1)
	}

	fresh := c.create(map[string]any{"template": "busybox"})
	if got := decodeSandbox(t, c.do("GET", "/v1/sandboxes/"+fresh, nil)); *got.TemplateVersionID != v2.ID {
		t.Errorf("new create got %s, want %s", *got.TemplateVersionID, v2.ID)
	}
	if !strings.Contains(lowerDir(t, fresh), v2.ID) {
		t.Errorf("new sandbox mounts %s, want %s", lowerDir(t, fresh), v2.ID)
	}

	pinned := c.create(map[string]any{"template_version_id": v1})
	got := decodeSandbox(t, c.do("GET", "/v1/sandboxes/"+pinned, nil))
	if *got.TemplateVersionID != v1 || got.Template != "busybox" {
		t.Errorf("pinned create: %+v, want busybox %s", got, v1)
	}
	if !strings.Contains(lowerDir(t, pinned), v1) {
		t.Errorf("pinned sandbox mounts %s, want %s", lowerDir(t, pinned), v1)
	}

	for _, tc := range []struct {
		body   map[string]any
		status int
		code   string
	}{
		{map[string]any{"template_version_id": "tplv_01JNDX3V6Z9Q6N1S9Y8K7C2F3A"}, 404, "not_found"},
		{map[string]any{"template": "pt-base", "template_version_id": v1}, 400, "invalid_request"},
	} {
		r := c.do("POST", "/v1/sandboxes", tc.body)
		if r.Status != tc.status || r.JSON()["code"] != tc.code || r.JSON()["field"] != "template_version_id" {
			t.Errorf("%v: %d %s, want %d %s", tc.body, r.Status, r.Body, tc.status, tc.code)
		}
	}
	if r := c.do("GET", "/v1/templates/nope/versions", nil); r.Status != 404 {
		t.Errorf("versions of an unknown slug: %d", r.Status)
	}
}

// TestTemplatesDefaultAndSessionTTL: python-node (Python 3 + Node.js) is
// the server's default template and a session template (one-hour TTL by
// default); node is lean.
func TestTemplatesDefaultAndSessionTTL(t *testing.T) {
	c := newClient(t)
	r := c.do("GET", "/v1/templates", nil)
	for _, slug := range []string{"python-node", "node", "pt-base", "busybox"} {
		if !strings.Contains(string(r.Body), `"slug":"`+slug+`"`) {
			t.Errorf("GET /v1/templates lacks %s: %s", slug, r.Body)
		}
	}
	if d := c.do("GET", "/v1/templates/python-node", nil).JSON()["default"]; d != true {
		t.Errorf("python-node default = %v, want true", d)
	}
	if d := c.do("GET", "/v1/templates/busybox", nil).JSON()["default"]; d != false {
		t.Errorf("busybox default = %v, want false", d)
	}
	ensureTemplate(t, c, "python-node")
	ensureTemplate(t, c, "node")

	// A create with a TTL and metadata: {template: "python-node", ttlMs: 10 min, metadata}.
	r = c.do("POST", "/v1/sandboxes", map[string]any{"template": "python-node", "ttl_ms": 10 * 60 * 1000, "metadata": map[string]string{"run": "nightly-eval"}})
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	sb := decodeSandbox(t, r)
	t.Cleanup(func() { c.do("POST", "/v1/sandboxes/"+sb.ID+"/kill", nil) })
	if sb.Status != "creating" && sb.Status != "ready" || sb.ExpiresAt == nil {
		t.Errorf("create answered %s", r.Body)
	}
	waitTTLState(t, c, sb.ID, "running")
	out := c.mustSh(sb.ID, "python3 -c 'print(6*7)' && node -e 'console.log(6*7)'")
	if strings.Fields(out)[0] != "42" || len(strings.Fields(out)) != 2 {
		t.Errorf("python-node: %q", out)
	}

	// No template, no ttl: the default template, a one-hour session.
	def := c.create(map[string]any{})
	got := decodeSandbox(t, c.do("GET", "/v1/sandboxes/"+def, nil))
	if got.Template != "python-node" || got.TTLMs == nil || *got.TTLMs != 3600000 || got.AutoStopMinutes != 0 {
		t.Errorf("default create: template %s ttl_ms %v auto_stop %d, want python-node, 3600000, 0", got.Template, got.TTLMs, got.AutoStopMinutes)
	}

	lean := c.create(map[string]any{"template": "node", "ttl_ms": 600000})
	if res := c.sh(lean, "node -e 'console.log(1+1)'; command -v python3 || echo none"); strings.Join(strings.Fields(res.Stdout), " ") != "2 none" {
		t.Errorf("node template: %q %q", res.Stdout, res.Stderr)
	}
}
