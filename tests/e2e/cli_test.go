package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pt runs the real pt binary against the test's ptd.
func pt(t *testing.T, stdin []byte, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.binDir, "pt"), args...)
	cmd.Env = append(os.Environ(), "PT_API_URL="+env.url, "PT_TOKEN="+env.token)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestCLI(t *testing.T) {
	requireEnv(t)
	c := newClient(t)
	out, errOut, code := pt(t, nil, "sandbox", "create", "-t", "busybox", "--cpu", "1", "--ram", "256", "--name", "cli-box", "--json")
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	var sb map[string]any
	if err := json.Unmarshal([]byte(out), &sb); err != nil || sb["state"] != "running" {
		t.Fatalf("create --json: %q %v", out, err)
	}
	id := sb["id"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })

	if out, _, _ := pt(t, nil, "sandbox", "list", "--state", "running"); !strings.Contains(out, id) || !strings.Contains(out, "cli-box") {
		t.Errorf("list table:\n%s", out)
	}
	if out, _, code := pt(t, nil, "sandbox", "exec", id, "--", "sh", "-c", "echo out; echo err >&2; exit 3"); code != 3 || out != "out\n" {
		t.Errorf("exec: code %d out %q", code, out)
	}
	local := filepath.Join(t.TempDir(), "in.txt")
	os.WriteFile(local, []byte("payload\n"), 0o644)
	if _, e, code := pt(t, nil, "sandbox", "cp", local, id+":/root/in.txt"); code != 0 {
		t.Fatalf("cp up: %d %s", code, e)
	}
	if out := c.mustSh(id, "cat /root/in.txt"); out != "payload\n" {
		t.Errorf("uploaded: %q", out)
	}
	back := filepath.Join(t.TempDir(), "back.txt")
	if _, e, code := pt(t, nil, "sandbox", "cp", id+":/root/in.txt", back); code != 0 {
		t.Fatalf("cp down: %d %s", code, e)
	}
	if b, _ := os.ReadFile(back); string(b) != "payload\n" {
		t.Errorf("downloaded: %q", b)
	}
	if out, _, _ := pt(t, nil, "sandbox", "get", id, "--json"); !strings.Contains(out, `"cli-box"`) {
		t.Errorf("get: %s", out)
	}
	if _, e, code := pt(t, nil, "sandbox", "rm", id); code != 0 {
		t.Errorf("rm: %d %s", code, e)
	}
	waitState(t, c, id, "deleted")
	// Errors say what to do next.
	_, e, code := pt(t, nil, "sandbox", "get", "sbx_01KZZZZZZZZZZZZZZZZZZZZZZZ")
	if code != 1 || !strings.Contains(e, "pt:") {
		t.Errorf("get missing: %d %q", code, e)
	}
}
