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

// TestKernelPortsOutsideTheLocalRange: a kernel's five ports are distinct,
// free, and outside the range connecting sockets take their own ports
// from, so the server's client, retrying its connects while the kernel
// starts, can never connect to itself on a port the kernel is about to
// bind; and not among the low ports users' servers listen on.
func TestKernelPortsOutsideTheLocalRange(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	if err := Install(dir); err != nil {
		t.Fatal(err)
	}
	script := `
import socket, sys
sys.path.insert(0, sys.argv[1])
import server
lo, hi = server.local_port_range()
for _ in range(20):
    info = server.connection_info()
    ports = [info[k] for k in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")]
    assert len(set(ports)) == 5, ports
    for p in ports:
        assert not lo <= p <= hi and p >= 10000, (p, lo, hi)
        s = socket.socket()
        s.bind(("127.0.0.1", p))
        s.close()
    assert info["ip"] == "127.0.0.1" and len(info["key"]) == 32 and info["signature_scheme"] == "hmac-sha256", info
print("ok")
`
	out, err := exec.Command(py, "-c", script, dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("%v\n%s", err, out)
	}
}
