// Package testenv gates tests on what the machine offers. Privileged tests
// run by default when the process is root (as in CI) and skip with a clear
// message otherwise; isolation tests must never skip in CI, so under CI=true
// a missing requirement fails instead of skipping.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// RequiresRoot skips t unless running as root (fails under CI).
func RequiresRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "requires root")
	}
}

// RequiresCommand skips t unless every named program is on PATH (fails
// under CI, where the setup must have installed it).
func RequiresCommand(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			skipOrFail(t, "requires "+n+" on PATH (run scripts/setup.sh)")
		}
	}
}

// Require skips t with msg unless ok (fails under CI).
func Require(t testing.TB, ok bool, msg string) {
	t.Helper()
	if !ok {
		skipOrFail(t, msg)
	}
}

// RequiresNode returns node's path once node is on PATH and dir's
// node_modules holds each of pkgs (scripts/test.sh runs `npm ci` there);
// otherwise it skips t (fails under CI).
func RequiresNode(t testing.TB, dir string, pkgs ...string) string {
	t.Helper()
	RequiresCommand(t, "node")
	node, _ := exec.LookPath("node")
	for _, pkg := range pkgs {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			skipOrFail(t, "no "+pkg+" in node_modules: run `npm ci` in "+abs(dir)+" (scripts/test.sh does)")
		}
	}
	return node
}

// RequiresVenv returns the python of dir's .venv, which scripts/test.sh
// makes from dir's requirements.txt; without it, it skips t (fails under
// CI).
func RequiresVenv(t testing.TB, dir string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, ".venv", "lib")); err != nil {
		skipOrFail(t, "no .venv: run `python3 -m venv .venv && .venv/bin/pip install -r requirements.txt` in "+abs(dir)+" (scripts/test.sh does)")
	}
	return filepath.Join(dir, ".venv", "bin", "python")
}

func abs(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}

func skipOrFail(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// RefusedAddr returns a loopback address that refuses every connection
// for the rest of t: a socket bound there that never listens. A port
// that was listened on and closed can be taken at once by any other test
// running alongside (and then answers), so a test of an unreachable peer
// holds its port this way; the socket has no SO_REUSEADDR, so nothing
// else can bind the port while t runs.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
