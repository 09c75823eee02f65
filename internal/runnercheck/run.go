package runnercheck

import (
	"os/exec"
	"testing"
)

// Run runs cmd, an outside runner's suite (name says which: "node --test",
// "pytest"), logs all it printed, and fails t when it exits nonzero or,
// read by check (NodeTest, Pytest; nil for none), its summary does not
// prove the run.
func Run(t testing.TB, name string, cmd *exec.Cmd, check func(string) error) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	t.Logf("%s output:\n%s", name, out)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if check == nil {
		return
	}
	if err := check(string(out)); err != nil {
		t.Fatal(err)
	}
}
