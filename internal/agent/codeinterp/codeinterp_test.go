package codeinterp

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallWritesTheSources: the server and the JavaScript REPL land in
// the directory byte for byte (pt-agent runs them from there).
func TestInstallWritesTheSources(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ci")
	if err := Install(dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{"server.py": serverPy, "repl.js": replJS} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) || len(want) == 0 {
			t.Errorf("%s: %d bytes, want %d (%v)", name, len(got), len(want), err)
		}
	}
}

// TestEnvFileSeesEveryReplacement: the server keeps the sandbox's
// environment between cells, yet every replacement pt-agent makes (a new
// file renamed over the old, as writeEnvFile does) is seen by the next
// cell, also several within one tick of the file clock, and a removed
// file is an empty environment.
func TestEnvFileSeesEveryReplacement(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	if err := Install(dir); err != nil {
		t.Fatal(err)
	}
	script := `
import json, os, sys
sys.path.insert(0, sys.argv[1])
import server
p = os.path.join(sys.argv[1], "env.json")
def write(d):
    with open(p + ".tmp", "w") as f:
        json.dump(d, f)
    os.rename(p + ".tmp", p)
e = server.EnvFile(p)
assert e.get() == {}, e.get()
for i in range(200):  # same size every time, many per clock tick
    write({"A": str(i % 10)})
    assert e.get() == {"A": str(i % 10)}, (i, e.get())
got = e.get()
got["B"] = "x"  # a caller's copy: the cache is not changed
assert e.get() == {"A": "9"}, e.get()
os.remove(p)
assert e.get() == {}, e.get()
print("ok")
`
	out, err := exec.Command(py, "-c", script, dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("%v\n%s", err, out)
	}
}
