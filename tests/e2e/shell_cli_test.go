package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// `pt sandbox shell` without a terminal: stdin feeds the shell on pipes,
// the exit code comes back.
func TestShellCLIPiped(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})

	out, errOut, code := pt(t, []byte("echo hi; exit 4\n"), "sandbox", "shell", id)
	if code != 4 || out != "hi\n" {
		t.Errorf("login shell: code %d, stdout %q, stderr %q; want 4 and \"hi\\n\"", code, out, errOut)
	}
	out, errOut, code = pt(t, []byte("abc"), "sandbox", "shell", id, "--", "sh", "-c", "cat; echo err >&2; exit 5")
	if code != 5 || out != "abc" || errOut != "err\n" {
		t.Errorf("command: code %d, stdout %q, stderr %q; want 5, abc, err", code, out, errOut)
	}
	_, errOut, code = pt(t, []byte(""), "sandbox", "shell", "sb_nope")
	if code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("unknown sandbox: code %d, stderr %q", code, errOut)
	}
}

// ttyOut collects what pt writes to its terminal.
type ttyOut struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (o *ttyOut) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// `pt sandbox shell` on a real terminal: raw mode, size, SIGWINCH,
// Ctrl-C reaching the sandbox, and the exit code.
func TestShellCLITerminal(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})

	cmd := exec.Command(filepath.Join(env.binDir, "pt"), "sandbox", "shell", id)
	cmd.Env = append(os.Environ(), "PT_API_URL="+env.url, "PT_TOKEN="+env.token)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); tty.Close() })
	var out ttyOut
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			out.mu.Lock()
			out.buf.Write(buf[:n])
			out.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(out.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q on the terminal; got %q", want, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	send := func(s string) {
		t.Helper()
		if _, err := tty.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	send("stty size\n")
	waitFor("30 100")
	if err := pty.Setsize(tty, &pty.Winsize{Rows: 40, Cols: 120}); err != nil { // SIGWINCH to pt
		t.Fatal(err)
	}
	// The resize travels asynchronously: ask until the shell sees it.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "40 120") {
		if time.Now().After(deadline) {
			t.Fatalf("resize never reached the sandbox: %q", out.String())
		}
		send("stty size\n")
		time.Sleep(200 * time.Millisecond)
	}
	send("sleep 600 && echo slept\n")
	time.Sleep(500 * time.Millisecond) // let sleep start; the check below does not depend on it
	send("\x03")                       // Ctrl-C: pt is raw, so this is a byte for the sandbox
	send("echo rc=$?\n")
	waitFor("rc=130")
	send("exit 6\n")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 6 {
			t.Fatalf("pt ended with %v, want exit status 6; terminal %q", err, out.String())
		}
	case <-ctx.Done():
		t.Fatalf("pt did not exit; terminal %q", out.String())
	}
	if strings.Contains(out.String(), "\nslept") {
		t.Errorf("Ctrl-C did not interrupt sleep: %q", out.String())
	}
}
