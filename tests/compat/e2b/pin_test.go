package e2bcompat

import (
	"testing"
	"time"
)

// TestTemplateVersionPinned: an older template version ID given as
// templateID pins that version, like template_version_id on /v1.
func TestTemplateVersionPinned(t *testing.T) {
	c := newClient(t)
	auth := []string{"Authorization", "Bearer " + env.token}
	old, _ := c.do("GET", "/v1/templates/busybox", nil, auth...).JSON()["version_id"].(string)
	if old == "" {
		t.Fatal("busybox has no version")
	}
	r := c.do("POST", "/v1/templates/busybox/builds", nil, auth...)
	if r.Status != 202 {
		t.Fatalf("new build: %d %s", r.Status, r.Body)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for c.do("GET", "/v1/templates/busybox", nil, auth...).JSON()["status"] != "ready" {
		if time.Now().After(deadline) {
			t.Fatal("new busybox version never ready")
		}
		time.Sleep(200 * time.Millisecond)
	}
	s := c.create(map[string]any{"templateID": old})
	got := c.do("GET", "/v1/sandboxes/"+s.SandboxID, nil, auth...).JSON()
	if got["template_version_id"] != old || s.TemplateID != "busybox" {
		t.Errorf("create by an older version runs %v (template %q), want %s", got["template_version_id"], s.TemplateID, old)
	}
}
