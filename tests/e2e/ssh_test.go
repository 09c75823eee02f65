package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
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

	"github.com/creack/pty"
	"github.com/platinum-dev/platinum/internal/testenv"
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

// sshOpts are the OpenSSH options every test client uses: this key only,
// no host key prompts, no password fallback.
func sshOpts(key string) []string {
	return []string{"-i", key, "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=30"}
}

// runTool runs an OpenSSH client tool (ssh, scp, sftp) with a deadline.
func runTool(t *testing.T, stdin, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &o, &e, strings.NewReader(stdin)
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return o.String(), e.String(), code
}

// sshRun runs the real OpenSSH client against the test ptd's gateway.
func sshRun(t *testing.T, key, user string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	host, port, _ := net.SplitHostPort(env.sshAddr)
	full := append([]string{"-p", port}, sshOpts(key)...)
	for len(args) > 0 && strings.HasPrefix(args[0], "-") { // ssh options, then the command
		full, args = append(full, args[0]), args[1:]
	}
	full = append(append(full, user+"@"+host), args...)
	return runTool(t, stdin, "ssh", full...)
}

// scpRun runs the real scp with args after the connection options;
// remote paths are written "ID:path".
func scpRun(t *testing.T, key string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	host, port, _ := net.SplitHostPort(env.sshAddr)
	full := append([]string{"-P", port}, sshOpts(key)...)
	for _, a := range args {
		if id, path, ok := strings.Cut(a, ":"); ok && strings.HasPrefix(id, "sbx_") {
			a = id + "@" + host + ":" + path
		}
		full = append(full, a)
	}
	return runTool(t, "", "scp", full...)
}

// sftpBatch runs the real sftp client in batch mode (-b -: commands on
// stdin; any failing command fails the run).
func sftpBatch(t *testing.T, key, id, batch string) (stdout, stderr string, code int) {
	t.Helper()
	host, port, _ := net.SplitHostPort(env.sshAddr)
	full := append(append([]string{"-P", port}, sshOpts(key)...), "-b", "-", id+"@"+host)
	return runTool(t, batch, "sftp", full...)
}

func requireSSH(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"ssh", "ssh-keygen", "scp", "sftp"} {
		_, err := exec.LookPath(tool)
		testenv.Require(t, err == nil, "the OpenSSH client's "+tool+" is missing: run scripts/setup.sh with PT_SETUP_TESTS=1")
	}
}

// TestSSHGateway drives the gateway with the real OpenSSH tools on both
// runtime classes: exec, shells with and without a terminal (its size
// and resizes), scp and sftp into the sandbox's filesystem, and local
// port forwarding.
func TestSSHGateway(t *testing.T) {
	requireSSH(t)
	c := newClient(t)
	for _, rt := range []string{"runc", "gvisor"} {
		t.Run(rt, func(t *testing.T) {
			key, pub := sshKey(t, "owner")
			id := c.create(map[string]any{"template": "busybox", "runtime": rt, "ssh_keys": []string{pub}})
			testSSHSessions(t, c, key, id)
			t.Run("scp and sftp", func(t *testing.T) { testSSHFiles(t, c, key, id) })
			t.Run("local port forwarding", func(t *testing.T) { testSSHForward(t, c, key, id) })
		})
	}
}

func testSSHSessions(t *testing.T, c *client, key, id string) {
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
		// ssh's stdin is no terminal here, so it asks for a PTY of no
		// size: the gateway gives it 80x24.
		out, _, code := sshRun(t, key, id, "", "-tt", "stty size; tty; exit 5")
		if code != 5 || !strings.Contains(out, "24 80\r\n/dev/pts/") {
			t.Fatalf("code %d stdout %q, want 5, \"24 80\" and a /dev/pts terminal", code, out)
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
	t.Run("a real terminal's size and resizes", func(t *testing.T) {
		host, port, _ := net.SplitHostPort(env.sshAddr)
		cmd := exec.Command("ssh", append(append([]string{"-p", port}, sshOpts(key)...), "-t", id+"@"+host)...)
		term := startTTY(t, cmd, 30, 100)
		term.send("stty size\n")
		term.waitFor("30 100")
		if err := pty.Setsize(term.tty, &pty.Winsize{Rows: 40, Cols: 120}); err != nil { // SIGWINCH to ssh
			t.Fatal(err)
		}
		term.pollFor("stty size\n", "40 120") // window-change travels asynchronously
		term.send("exit 6\n")
		if code := term.wait(); code != 6 {
			t.Fatalf("ssh exited %d, want 6; terminal %q", code, term.out.String())
		}
	})
}

// testSSHFiles copies files in and out with scp (SFTP underneath, as
// OpenSSH 9 does by default) and sftp's batch mode, and checks through
// the API that they are the sandbox's files.
func testSSHFiles(t *testing.T, c *client, key, id string) {
	local := t.TempDir()
	payload := make([]byte, 300<<10+7) // several SFTP packets, not aligned
	rand.Read(payload)
	sum := fmt.Sprintf("%x", sha256.Sum256(payload))
	up := filepath.Join(local, "up.bin")
	if err := os.WriteFile(up, payload, 0o644); err != nil {
		t.Fatal(err)
	}
	sandboxSum := func(path string) string {
		t.Helper()
		out := c.mustSh(id, "sha256sum "+path)
		return strings.Fields(out)[0]
	}

	if _, errOut, code := scpRun(t, key, up, id+":/root/scp.bin"); code != 0 {
		t.Fatalf("scp upload: %d %s", code, errOut)
	}
	if got := sandboxSum("/root/scp.bin"); got != sum {
		t.Fatalf("uploaded file in the sandbox: sha256 %s, want %s", got, sum)
	}
	down := filepath.Join(local, "down.bin")
	if _, errOut, code := scpRun(t, key, id+":/root/scp.bin", down); code != 0 {
		t.Fatalf("scp download: %d %s", code, errOut)
	}
	if b, _ := os.ReadFile(down); !bytes.Equal(b, payload) {
		t.Fatalf("downloaded %d bytes, not the %d uploaded", len(b), len(payload))
	}
	// Relative paths are the user's home; directories recursively.
	if err := os.MkdirAll(filepath.Join(local, "tree/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(local, "tree/sub/leaf.txt"), []byte("leaf\n"), 0o644)
	if _, errOut, code := scpRun(t, key, "-r", filepath.Join(local, "tree"), id+":copied"); code != 0 {
		t.Fatalf("scp -r: %d %s", code, errOut)
	}
	if out := c.mustSh(id, "cat /root/copied/sub/leaf.txt"); out != "leaf\n" {
		t.Fatalf("scp -r landed %q", out)
	}
	if _, errOut, code := scpRun(t, key, id+":/root/no-such-file", down); code == 0 || !strings.Contains(errOut, "No such file") {
		t.Errorf("scp of a missing file: %d %q", code, errOut)
	}

	back := filepath.Join(local, "sftp-back.bin")
	out, errOut, code := sftpBatch(t, key, id, strings.Join([]string{
		"mkdir /root/sftpdir",
		"cd /root/sftpdir",
		"put " + up + " in.bin",
		"ls -1",
		"get in.bin " + back,
		"rename in.bin kept.bin",
		"put " + up + " gone.bin",
		"rm gone.bin",
		"ls -1 /root/sftpdir",
	}, "\n")+"\n")
	if code != 0 {
		t.Fatalf("sftp batch: %d stdout %q stderr %q", code, out, errOut)
	}
	if b, _ := os.ReadFile(back); !bytes.Equal(b, payload) {
		t.Fatalf("sftp get: %d bytes, not the %d put", len(b), len(payload))
	}
	if got := sandboxSum("/root/sftpdir/kept.bin"); got != sum {
		t.Fatalf("sftp put in the sandbox: sha256 %s, want %s", got, sum)
	}
	if out := c.mustSh(id, "ls /root/sftpdir"); out != "kept.bin\n" {
		t.Errorf("sandbox dir after sftp rm/rename: %q", out)
	}
	if !strings.Contains(out, "in.bin") || !strings.Contains(out, "kept.bin") {
		t.Errorf("sftp ls output %q", out)
	}
	// A failing command fails the batch, with the server's reason.
	if _, errOut, code := sftpBatch(t, key, id, "rm /root/sftpdir/nope\n"); code == 0 || !strings.Contains(errOut, "No such file") {
		t.Errorf("sftp rm of a missing file: %d %q", code, errOut)
	}
	if _, errOut, code := sftpBatch(t, key, id, "rmdir /root/sftpdir\n"); code == 0 {
		t.Errorf("sftp rmdir of a non-empty dir succeeded: %q", errOut)
	}
	if out, errOut, code := sftpBatch(t, key, id, "rm /root/sftpdir/kept.bin\nrmdir /root/sftpdir\n"); code != 0 {
		t.Fatalf("sftp rm+rmdir: %d %q %q", code, out, errOut)
	}
	if out := c.sh(id, "test -e /root/sftpdir"); out.ExitCode == 0 {
		t.Error("the directory sftp removed is still in the sandbox")
	}
}

func testSSHForward(t *testing.T, c *client, key, id string) {
	c.mustSh(id, "mkdir -p /tmp/www && echo forwarded-page > /tmp/www/index.html")
	startBackground(t, c, id, map[string]any{"cmd": []string{"httpd", "-f", "-p", "8080", "-h", "/tmp/www"}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	local := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	host, port, _ := net.SplitHostPort(env.sshAddr)
	cmd := exec.Command("ssh", append(append([]string{"-N", "-p", port}, sshOpts(key)...), "-o", "ExitOnForwardFailure=yes",
		"-L", fmt.Sprintf("127.0.0.1:%d:localhost:8080", local), id+"@"+host)...)
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
}

// TestSSHAccess: only the sandbox's own keys log in, every refusal looks
// the same, key changes apply at the next login, and a login to a stopped
// sandbox starts it unless its auto_resume is off.
func TestSSHAccess(t *testing.T) {
	requireSSH(t)
	c := newClient(t)
	key, pub := sshKey(t, "owner")
	otherKey, otherPub := sshKey(t, "other")
	strangerKey, _ := sshKey(t, "stranger")
	id := c.create(map[string]any{"template": "busybox", "ssh_keys": []string{pub}})
	otherID := c.create(map[string]any{"template": "busybox", "ssh_keys": []string{otherPub}})

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
		for name, args := range map[string][]string{
			"scp":  {"/etc/hostname", id + ":/root/x"},
			"sftp": nil,
		} {
			var errOut string
			var code int
			if args != nil {
				_, errOut, code = scpRun(t, strangerKey, args...)
			} else {
				_, errOut, code = sftpBatch(t, strangerKey, id, "ls\n")
			}
			if code == 0 || !strings.Contains(errOut, "Permission denied (publickey)") {
				t.Errorf("%s with a stranger's key: code %d stderr %q", name, code, errOut)
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
	t.Run("a login starts a stopped sandbox", func(t *testing.T) {
		c.mustSh(otherID, "echo before-stop > /root/marker")
		stop(t, c, otherID)
		// The PTY WebSocket does not resume: it answers the state.
		if r := c.do("GET", "/v1/sandboxes/"+otherID+"/pty", nil); r.Status != 409 {
			t.Errorf("pty of a stopped sandbox: %d %s", r.Status, r.Body)
		}
		out, errOut, code := sshRun(t, otherKey, otherID, "", "cat /root/marker")
		if code != 0 || out != "before-stop\n" {
			t.Fatalf("login to the stopped sandbox: code %d stdout %q stderr %q", code, out, errOut)
		}
		if st := c.do("GET", "/v1/sandboxes/"+otherID, nil).JSON()["state"]; st != "running" {
			t.Errorf("state after the login: %v", st)
		}
	})
	t.Run("not with auto_resume off", func(t *testing.T) {
		k, p := sshKey(t, "noresume")
		nid := c.create(map[string]any{"template": "busybox", "ssh_keys": []string{p}, "auto_resume": false})
		stop(t, c, nid)
		out, errOut, code := sshRun(t, k, nid, "", "echo in")
		if code != 255 || out != "" || !strings.Contains(errOut, "stopped and its auto_resume is off") {
			t.Fatalf("code %d stdout %q stderr %q, want 255 and why", code, out, errOut)
		}
		if _, errOut, code := sftpBatch(t, k, nid, "ls\n"); code == 0 {
			t.Errorf("sftp to a stopped sandbox with auto_resume off worked: %q", errOut)
		}
		if st := c.do("GET", "/v1/sandboxes/"+nid, nil).JSON()["state"]; st != "stopped" {
			t.Errorf("state after refused logins: %v, want stopped", st)
		}
	})
}

// stop stops a sandbox and waits until it is stopped.
func stop(t *testing.T, c *client, id string) {
	t.Helper()
	if r := c.do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped&wait_timeout_ms=120000", nil); r.Status != 200 {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
}

// ttySession is a command running on a pseudo-terminal the test holds.
type ttySession struct {
	t   *testing.T
	cmd *exec.Cmd
	tty *os.File
	out *ttyOut
	// drained closes when everything the command wrote has been read.
	drained chan struct{}
}

// startTTY starts cmd on a new terminal of rows x cols; the test's
// cleanup kills it.
func startTTY(t *testing.T, cmd *exec.Cmd, rows, cols uint16) *ttySession {
	t.Helper()
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: rows, Cols: cols})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); tty.Close() })
	s := &ttySession{t: t, cmd: cmd, tty: tty, out: &ttyOut{}, drained: make(chan struct{})}
	go func() {
		defer close(s.drained)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			s.out.mu.Lock()
			s.out.buf.Write(buf[:n])
			s.out.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s
}

func (s *ttySession) send(in string) {
	s.t.Helper()
	if _, err := s.tty.Write([]byte(in)); err != nil {
		s.t.Fatal(err)
	}
}

func (s *ttySession) waitFor(want string) {
	s.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(s.out.String(), want) {
		if time.Now().After(deadline) {
			s.t.Fatalf("no %q on the terminal; got %q", want, s.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pollFor sends in until the terminal shows want.
func (s *ttySession) pollFor(in, want string) {
	s.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(s.out.String(), want) {
		if time.Now().After(deadline) {
			s.t.Fatalf("no %q on the terminal; got %q", want, s.out.String())
		}
		s.send(in)
		time.Sleep(200 * time.Millisecond)
	}
}

// wait returns the command's exit code once it exited and its last
// output has been read.
func (s *ttySession) wait() int {
	s.t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		select {
		case <-s.drained: // the terminal reads EIO once the output is drained
		case <-time.After(10 * time.Second):
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			s.t.Fatal(err)
		}
		return 0
	case <-time.After(time.Minute):
		s.t.Fatalf("%s did not exit; terminal %q", s.cmd.Path, s.out.String())
	}
	return -1
}
