package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestTTLGoSDK: the Go SDK's TTL surface: TTLMs at create, Status,
// SetTTL, Kill (twice), Include in lists, template versions and pinning.
func TestTTLGoSDK(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	cl := platinum.New(env.url, env.token)
	tag := "ttl-sdk-" + randHex(4)
	sb, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", TTLMs: 10 * 60 * 1000,
		Metadata: map[string]string{"run": tag}}, platinum.WaitForRunning(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Sandboxes.Kill(context.Background(), sb.ID) })
	if sb.Status != platinum.StatusReady || sb.TTLMs != 600000 || sb.ExpiresAt == nil || sb.TemplateSlug != "busybox" || sb.TemplateVersion < 1 {
		t.Fatalf("created: status %s ttl %d expires %v slug %q version %d", sb.Status, sb.TTLMs, sb.ExpiresAt, sb.TemplateSlug, sb.TemplateVersion)
	}
	h, err := cl.Sandboxes.Connect(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	up, err := h.SetTTL(ctx, time.Hour)
	if err != nil || up.TTLMs != 3600000 || !up.ExpiresAt.After(*sb.ExpiresAt) {
		t.Fatalf("SetTTL: %+v %v", up, err)
	}
	var ae *platinum.APIError
	if _, err := cl.Sandboxes.SetTTL(ctx, sb.ID, 25*time.Hour); !errors.As(err, &ae) || ae.Code != "sandbox_ttl_exceeded" {
		t.Errorf("SetTTL 25h = %v, want sandbox_ttl_exceeded", err)
	}
	if _, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox", TTLMs: 2 * 3600 * 1000}); !errors.As(err, &ae) || ae.Code != "sandbox_ttl_exceeded" {
		t.Errorf("create with 2h = %v, want sandbox_ttl_exceeded", err)
	}

	vs, err := cl.Templates.Versions(ctx, "busybox")
	if err != nil || len(vs) == 0 {
		t.Fatalf("Versions: %v %v", vs, err)
	}
	if i := indexVersion(vs, sb.TemplateVersionID); i < 0 || vs[i].Version != sb.TemplateVersion {
		t.Errorf("sandbox's version %s (#%d) not in %+v", sb.TemplateVersionID, sb.TemplateVersion, vs)
	}
	pinned, err := cl.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{TemplateVersionID: sb.TemplateVersionID, TTLMs: 600000})
	if err != nil || pinned.Template != "busybox" || pinned.TemplateVersionID != sb.TemplateVersionID {
		t.Fatalf("pinned create: %+v %v", pinned, err)
	}
	t.Cleanup(func() { cl.Sandboxes.Kill(context.Background(), pinned.ID) })

	for i := range 2 {
		k, err := h.Kill(ctx)
		if err != nil || k.Status != platinum.StatusDestroyed || k.DestroyedReason != platinum.DestroyedUserKilled {
			t.Fatalf("kill %d: %+v %v", i, k, err)
		}
	}
	if _, err := h.SetTTL(ctx, time.Minute); !errors.As(err, &ae) || ae.Code != "sandbox_destroyed" {
		t.Errorf("SetTTL after kill = %v, want sandbox_destroyed", err)
	}
	list, err := cl.Sandboxes.List(ctx, platinum.ListOptions{Metadata: map[string]string{"run": tag}})
	if err != nil || len(list.Rows) != 0 {
		t.Errorf("default list: %+v %v, want the killed sandbox left out", list, err)
	}
	list, err = cl.Sandboxes.List(ctx, platinum.ListOptions{Metadata: map[string]string{"run": tag}, Include: []string{platinum.IncludeDestroyed}})
	if err != nil || len(list.Rows) != 1 || list.Rows[0].ID != sb.ID {
		t.Errorf("list include destroyed: %+v %v", list, err)
	}
}

func indexVersion(vs []platinum.TemplateVersion, id string) int {
	for i, v := range vs {
		if v.ID == id {
			return i
		}
	}
	return -1
}

// TestTTLCLI: pt sandbox create --ttl, pt sandbox ttl, pt sandbox kill,
// pt sandbox list --include, pt template versions.
func TestTTLCLI(t *testing.T) {
	requireEnv(t)
	c := newClient(t)
	tag := "ttl-cli-" + randHex(4)
	out, errOut, code := pt(t, nil, "sandbox", "create", "-t", "busybox", "--ttl", "10m", "--metadata", "run="+tag, "--json")
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	var sb struct {
		ID                string `json:"id"`
		TTLMs             int64  `json:"ttl_ms"`
		TemplateVersionID string `json:"template_version_id"`
	}
	if err := json.Unmarshal([]byte(out), &sb); err != nil || sb.TTLMs != 600000 {
		t.Fatalf("create --ttl 10m: %q %v", out, err)
	}
	t.Cleanup(func() { c.do("POST", "/v1/sandboxes/"+sb.ID+"/kill", nil) })
	if out, e, code := pt(t, nil, "sandbox", "ttl", sb.ID, "30m"); code != 0 || !strings.Contains(out, sb.ID+" expires at ") {
		t.Errorf("ttl: %d %q %s", code, out, e)
	}
	if got := decodeSandbox(t, c.do("GET", "/v1/sandboxes/"+sb.ID, nil)); got.TTLMs == nil || *got.TTLMs != 1800000 {
		t.Errorf("after pt sandbox ttl 30m: ttl_ms %v", got.TTLMs)
	}
	if _, e, code := pt(t, nil, "sandbox", "ttl", sb.ID, "25h"); code == 0 || !strings.Contains(e, "24") {
		t.Errorf("ttl 25h: code %d stderr %q, want a failure naming the limit", code, e)
	}
	if out, _, code := pt(t, nil, "template", "versions", "busybox"); code != 0 || !strings.Contains(out, sb.TemplateVersionID) {
		t.Errorf("template versions: %d %s", code, out)
	}
	for i := range 2 {
		if out, e, code := pt(t, nil, "sandbox", "kill", sb.ID); code != 0 || !strings.Contains(out, "destroyed") || !strings.Contains(out, "user_killed") {
			t.Errorf("kill %d: %d %q %s", i, code, out, e)
		}
	}
	if out, _, _ := pt(t, nil, "sandbox", "list", "--metadata", "run="+tag); strings.Contains(out, sb.ID) {
		t.Errorf("default list shows the killed sandbox:\n%s", out)
	}
	if out, _, _ := pt(t, nil, "sandbox", "list", "--metadata", "run="+tag, "--include", "destroyed"); !strings.Contains(out, sb.ID) {
		t.Errorf("list --include destroyed misses it:\n%s", out)
	}
}
