package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/testenv"
)

// TestCheckStaticAgent builds the same small program (it imports net and
// os/user, as pt-agent does) with cgo, which links it dynamically, and
// without, which makes it static: the check refuses the first with the
// build command to run, accepts the second, and refuses what is not an
// executable. installAgent, ptd's start-up step, refuses the dynamic one.
func TestCheckStaticAgent(t *testing.T) {
	testenv.RequiresCommand(t, "go", "gcc")
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module agentcheck\n\ngo 1.21\n"), 0o644)
	os.WriteFile(src, []byte("package main\n\nimport (\n\t\"net\"\n\t\"os/user\"\n)\n\nfunc main() { net.LookupHost(\"localhost\"); user.Current() }\n"), 0o644)
	build := func(name, cgo string) string {
		t.Helper()
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", out, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo, "GOFLAGS=")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build CGO_ENABLED=%s: %v\n%s", cgo, err, b)
		}
		return out
	}
	dynamic, static := build("dynamic", "1"), build("static", "0")

	err := CheckStaticAgent(dynamic)
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") || !strings.Contains(err.Error(), "CGO_ENABLED=0 go build -o "+dynamic+" ./cmd/pt-agent") {
		t.Errorf("dynamic binary: %v", err)
	}
	if err := CheckStaticAgent(static); err != nil {
		t.Errorf("static binary: %v", err)
	}
	script := filepath.Join(dir, "script")
	os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	if err := CheckStaticAgent(script); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("shell script: %v", err)
	}
	if _, err := installAgent(dynamic, t.TempDir()); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("installAgent of a dynamic binary: %v", err)
	}
	if _, err := installAgent(static, t.TempDir()); err != nil {
		t.Errorf("installAgent of a static binary: %v", err)
	}
}
