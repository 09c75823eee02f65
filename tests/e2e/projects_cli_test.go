package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ptAs runs pt with token as PT_TOKEN.
func ptAs(t *testing.T, token string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.binDir, "pt"), args...)
	cmd.Env = append(os.Environ(), "PT_API_URL="+env.url, "PT_TOKEN="+token)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// TestProjectsCLI: pt project create|list, pt token create --project,
// pt sandbox create --project and --idempotency-key, pt org quota.
func TestProjectsCLI(t *testing.T) {
	admin := newClient(t)
	orgID, org := createOrg(t, admin, "cli-"+randHex(4))
	tok := org.token

	out, stderr, err := ptAs(t, tok, "project", "create", "web")
	prj := strings.TrimSpace(out)
	if err != nil || !strings.HasPrefix(prj, "prj_") {
		t.Fatalf("pt project create: %v %q %s", err, out, stderr)
	}
	out, _, err = ptAs(t, tok, "project", "list")
	if err != nil || !strings.Contains(out, prj) || !strings.Contains(out, "default") || !strings.Contains(out, "web") {
		t.Fatalf("pt project list: %v\n%s", err, out)
	}

	key := "cli-" + randHex(8)
	var ids []string
	for range 2 {
		out, stderr, err = ptAs(t, tok, "sandbox", "create", "-t", "busybox", "--project", prj, "--idempotency-key", key, "--no-wait", "--json")
		if err != nil {
			t.Fatalf("pt sandbox create: %v %s", err, stderr)
		}
		var sb struct {
			ID        string `json:"id"`
			ProjectID string `json:"project_id"`
		}
		json.Unmarshal([]byte(out), &sb)
		if sb.ProjectID != prj {
			t.Fatalf("created in %q, want %s: %s", sb.ProjectID, prj, out)
		}
		ids = append(ids, sb.ID)
		t.Cleanup(func() { org.do("DELETE", "/v1/sandboxes/"+sb.ID, nil) })
	}
	if ids[0] != ids[1] {
		t.Errorf("the same --idempotency-key made two sandboxes: %v", ids)
	}

	out, stderr, err = ptAs(t, tok, "token", "create", "--project", prj)
	scoped := strings.TrimSpace(out)
	if err != nil || !strings.HasPrefix(scoped, "pt_") {
		t.Fatalf("pt token create: %v %q %s", err, out, stderr)
	}
	out, _, err = ptAs(t, scoped, "sandbox", "list", "--json")
	if err != nil || !strings.Contains(out, ids[0]) {
		t.Errorf("project token lists: %v %s", err, out)
	}
	if _, stderr, err = ptAs(t, scoped, "project", "create", "nope"); err == nil || !strings.Contains(stderr, "forbidden") {
		t.Errorf("project token creating a project: %v %s, want forbidden", err, stderr)
	}

	out, stderr, err = ptAs(t, env.token, "org", "quota", orgID, "--max-sandboxes", "7")
	if err != nil || !strings.Contains(out, "sandboxes") || !strings.Contains(out, "7") {
		t.Errorf("pt org quota: %v %s %s", err, out, stderr)
	}
}
