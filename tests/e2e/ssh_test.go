package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sshKey makes an ed25519 key pair with the real ssh-keygen and returns
// the private key's path and the public key line.
func sshKey(t *testing.T, name string) (path, pub string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	b, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return path, strings.TrimSpace(string(b))
}

// sshRun runs the real OpenSSH client against the test ptd's gateway.
func sshRun(t *testing.T, key, user string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	host, port, _ := net.SplitHostPort(env.sshAddr)
	full := []string{"-p", port, "-i", key, "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=30"}
	for len(args) > 0 && strings.HasPrefix(args[0], "-") { // ssh options, then the command
		full, args = append(full, args[0]), args[1:]
	}
	full = append(append(full, user+"@"+host), args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", full...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &o, &e, strings.NewReader(stdin)
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("ssh: %v", err)
	}
	return o.String(), e.String(), code
}

func requireSSH(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("ssh"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the OpenSSH client is missing: run scripts/setup.sh with PT_SETUP_TESTS=1")
		}
		t.Skip("no ssh client (openssh-client)")
	}
}

func TestSSHGateway(t *testing.T) {
	requireSSH(t)
	c := newClient(t)
	key, pub := sshKey(t, "owner")
	otherKey, otherPub := sshKey(t, "other")
	strangerKey, _ := sshKey(t, "stranger")
	id := c.create(map[string]any{"template": "busybox", "ssh_keys": []string{pub}})
	otherID := c.create(map[string]any{"template": "busybox", "ssh_keys": []string{otherPub}})

	t.Run("exec passes the exit code and splits stderr", func(t *testing.T) {
		out, errOut, code := sshRun(t, key, id, "", "uname -s; echo oops >&2; exit 3")
		if code != 3 || out != "Linux\n" || errOut != "oops\n" {
			t.Fatalf("code %d stdout %q stderr %q", code, out, errOut)
		}
	})
	t.Run("exec with stdin", func(t *testing.T) {
		out, _, code := sshRun(t, key, id, "abc\n", "cat; hostname >/dev/null")
		if code != 0 || out != "abc\n" {
			t.Fatalf("code %d stdout %q", code, out)
		}
	})
	t.Run("exec on a pty", func(t *testing.T) {
		out, _, code := sshRun(t, key, id, "", "-tt", "stty size; tty; exit 5")
		if code != 5 || !strings.Contains(out, "/dev/pts/") {
			t.Fatalf("code %d stdout %q", code, out)
		}
	})
	t.Run("shell without a pty reads commands from stdin", func(t *testing.T) {
		out, _, code := sshRun(t, key, id, "echo hi; exit 4\n", "-T")
		if code != 4 || out != "hi\n" {
			t.Fatalf("code %d stdout %q", code, out)
		}
	})
	t.Run("interactive shell on a pty", func(t *testing.T) {
		out, _, code := sshRun(t, key, id, "echo in-$((40+2))\nexit 6\n", "-tt")
		if code != 6 || !strings.Contains(out, "in-42") {
			t.Fatalf("code %d stdout %q", code, out)
		}
	})
	t.Run("refusals are alike", func(t *testing.T) {
		for name, tc := range map[string]struct{ key, user string }{
			"stranger's key":        {strangerKey, id},
			"another sandbox's key": {otherKey, id},
			"unknown sandbox":       {key, "sbx_01KZZZZZZZZZZZZZZZZZZZZZZZ"},
			"not a sandbox id":      {key, "root"},
		} {
			out, errOut, code := sshRun(t, tc.key, tc.user, "", "echo in")
			if code != 255 || out != "" || !strings.Contains(errOut, "Permission denied (publickey)") {
				t.Errorf("%s: code %d stdout %q stderr %q", name, code, out, errOut)
			}
		}
		// The other sandbox's own key does work there.
		if out, _, code := sshRun(t, otherKey, otherID, "", "echo in"); code != 0 || out != "in\n" {
			t.Errorf("other sandbox with its key: %d %q", code, out)
		}
	})
	t.Run("keys changed by PATCH apply at the next login", func(t *testing.T) {
		if r := c.do("PATCH", "/v1/sandboxes/"+id, map[string]any{"ssh_keys": []string{otherPub}}); r.Status != 200 {
			t.Fatalf("patch: %d %s", r.Status, r.Body)
		}
		if _, _, code := sshRun(t, key, id, "", "true"); code != 255 {
			t.Errorf("removed key still logs in: %d", code)
		}
		if out, _, code := sshRun(t, otherKey, id, "", "echo in"); code != 0 || out != "in\n" {
			t.Errorf("added key: %d %q", code, out)
		}
		c.do("PATCH", "/v1/sandboxes/"+id, map[string]any{"ssh_keys": []string{pub}})
	})
	t.Run("a stopped sandbox says so", func(t *testing.T) {
		if r := c.do("POST", "/v1/sandboxes/"+otherID+"/stop?wait_for_state=stopped&wait_timeout_ms=120000", nil); r.Status != 200 {
			t.Fatalf("stop: %d %s", r.Status, r.Body)
		}
		out, errOut, code := sshRun(t, otherKey, otherID, "", "echo in")
		if code != 255 || out != "" || !strings.Contains(errOut, "stopped") {
			t.Fatalf("code %d stdout %q stderr %q, want 255 and the state", code, out, errOut)
		}
		// The PTY WebSocket refuses before the upgrade, with the same state.
		if r := c.do("GET", "/v1/sandboxes/"+otherID+"/pty", nil); r.Status != 409 {
			t.Errorf("pty of a stopped sandbox: %d %s", r.Status, r.Body)
		}
	})
	t.Run("local port forwarding", func(t *testing.T) {
		c.mustSh(id, "mkdir -p /tmp/www && echo forwarded-page > /tmp/www/index.html")
		startBackground(t, c, id, map[string]any{"cmd": []string{"httpd", "-f", "-p", "8080", "-h", "/tmp/www"}})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		local := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		host, port, _ := net.SplitHostPort(env.sshAddr)
		cmd := exec.Command("ssh", "-N", "-p", port, "-i", key, "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
			"-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ExitOnForwardFailure=yes",
			"-L", fmt.Sprintf("127.0.0.1:%d:localhost:8080", local), id+"@"+host)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		var body string
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/index.html", local))
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if body = string(b); resp.StatusCode == 200 {
					break
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		if body != "forwarded-page\n" {
			t.Fatalf("through the tunnel: %q; ssh stderr %q", body, stderr.String())
		}
	})
}
