package benchkit

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// StartPtd builds Platinum and starts a ptd of its own with extra
// arguments, plus a Client for it. The bench programs run from the
// repository root (go run ./bench/...), which is what "." is here. Like
// ptdtest.Start it may return a Daemon with an error: defer its Stop
// before checking err, so a half-started ptd is cleaned up too.
func StartPtd(extra ...string) (*ptdtest.Daemon, *Client, error) {
	root, err := filepath.Abs(".")
	if err != nil {
		return nil, nil, err
	}
	d, err := ptdtest.Start(ptdtest.Options{RepoRoot: root, ExtraArgs: extra})
	if err != nil {
		return d, nil, err
	}
	return d, &Client{URL: d.URL, Token: d.Token}, nil
}

// NodeDir is dir (relative to the repository root) as an absolute path,
// once `npm ci` there has installed module: a bench that drives a node
// SDK fails on a missing install before it starts a ptd.
func NodeDir(dir, module string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(abs, "node_modules", module)); err != nil {
		return "", fmt.Errorf("run `npm ci` in %s first", abs)
	}
	return abs, nil
}

// StartPtdForNode is NodeDir then StartPtd, for a bench that drives a
// node SDK: it returns the SDK's dir too. Defer the Daemon's Stop (nil-safe)
// before checking err.
func StartPtdForNode(dir, module string, extra ...string) (string, *ptdtest.Daemon, *Client, error) {
	sdkDir, err := NodeDir(dir, module)
	if err != nil {
		return "", nil, nil, err
	}
	d, c, err := StartPtd(extra...)
	return sdkDir, d, c, err
}

// RunNode runs `node script args...` in dir with env added to this
// process's environment and its stderr passed through, and returns what
// it printed: a bench script's JSON timings.
func RunNode(dir string, env []string, script string, args ...string) ([]byte, error) {
	cmd := exec.Command("node", append([]string{script}, args...)...)
	cmd.Dir, cmd.Stderr = dir, os.Stderr
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", script, err)
	}
	return out, nil
}

// Pipes opens cmd's stdin and stdout, before it starts: an SDK runner
// reads one request a line and answers one JSON line (bench/sdk/runner.mjs).
func Pipes(cmd *exec.Cmd) (io.WriteCloser, io.ReadCloser, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	return in, out, nil
}

// Main is a bench program's main: it runs run and, when it fails, prints
// the error after the program's name (e.g. "bench/e2b") and exits 1.
func Main(name string, run func() error) {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
