// Package testenv gates tests on what the machine offers. Privileged tests
// run by default when the process is root (as in CI) and skip with a clear
// message otherwise; isolation tests must never skip in CI, so under CI=true
// a missing requirement fails instead of skipping.
package testenv

import (
	"os"
	"os/exec"
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

func skipOrFail(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
