package codeinterp

import (
	"strings"
	"testing"
	"time"
)

// The cold path of a sandbox's first result (docs/code-interpreter.md,
// "The first result"): these run first in testRunCode, on its new sandbox.

// execOut runs argv in the sandbox and returns its stdout, failing the test
// on a non-zero exit.
func (c *client) execOut(id string, argv ...string) string {
	c.t.Helper()
	r := c.do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": argv})
	if r.Status != 200 || r.JSON()["exit_code"] != float64(0) {
		c.t.Fatalf("exec %v: %d %s", argv, r.Status, r.Body)
	}
	s, _ := r.JSON()["stdout"].(string)
	return s
}

// testKernelAtBoot: the server starts the default Python kernel when the
// sandbox boots, before any call reaches it, so a first cell finds it
// (nearly) up. Looked for before this sandbox's first call of any kind to
// the server.
func testKernelAtBoot(t *testing.T, c *client, id string) {
	const find = `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done`
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if strings.Contains(c.execOut(id, "sh", "-c", find), "/code-interpreter/jupyter/kernel.py -f ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no kernel process 5 min after boot, and no call asked for one")
		}
	}
}

// bytecodeCheck imports what the kernel's launcher and the server import
// at start and lists every such module of the template whose compiled
// bytecode is missing or stale (a timestamp .pyc whose recorded mtime or
// size differs from its source's): Python compiles those on every kernel
// start, in every sandbox, since no one keeps what a sandbox writes.
const bytecodeCheck = `
import os, sys
sys.modules["debugpy"] = None  # as the launcher does
sys.modules["jedi"] = None
import ipykernel.kernelapp, ipykernel.ipkernel, ipykernel.zmqshell, IPython, zmq
bad, n = [], 0
for name, m in sorted(sys.modules.items()):
    src, pyc = getattr(m, "__file__", None), getattr(m, "__cached__", None)
    if not src or not src.endswith(".py") or not pyc or not src.startswith("/usr/lib/"):
        continue
    n += 1
    try:
        with open(pyc, "rb") as f:
            head = f.read(16)
        st = os.stat(src)
        flags = int.from_bytes(head[4:8], "little")
        ok = flags != 0 or (int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF and
                            int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF)
    except OSError:
        ok = False
    if not ok:
        bad.append(name)
print("checked", n)
print("bad", " ".join(bad))
`

// testTemplateBytecode: the template ships compiled bytecode for every
// module the kernel and the server import at start (Debian's postinst
// byte-compiles packages; a build that skipped it would have every kernel
// start compile IPython again).
func testTemplateBytecode(t *testing.T, c *client, id string) {
	out := c.execOut(id, "python3", "-B", "-c", bytecodeCheck)
	var checked, bad string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "checked "); ok {
			checked = v
		}
		if v, ok := strings.CutPrefix(l, "bad"); ok {
			bad = strings.TrimSpace(v)
		}
	}
	if checked == "" || checked == "0" {
		t.Fatalf("no module checked: %s", out)
	}
	if bad != "" {
		t.Errorf("modules without valid compiled bytecode in the template (of %s checked): %s", checked, bad)
	}
}

// serverModules starts a Python context with the server's own code in
// the sandbox (a second kernel beside the server's), runs a cell in it and
// prints the server-side modules of jupyter_client and pyzmq it imported.
const serverModules = `
import sys
sys.path.insert(0, "/run/platinum/code-interpreter")
import server
ctx = server.PythonContext("ctx_modules", "python", None, False)
ctx.ensure_started()
ctx.call(lambda: ctx.silent("__x = 1 + 1"))
print("jupyter_client:", sorted(m for m in sys.modules if m.split(".")[0] == "jupyter_client"))
print("zmq:", sorted(m for m in sys.modules if m.split(".")[0] == "zmq"))
ctx.close()
`

// testServerWithoutJupyterClient: the server launches and speaks to its
// kernels without importing jupyter_client, whose import (150-230 ms of
// CPU) came before the first kernel could even be launched, and without
// pyzmq, whose I/O thread cost a cell dozens of system calls
// (docs/code-interpreter.md, "On gVisor").
func testServerWithoutJupyterClient(t *testing.T, c *client, id string) {
	out := c.execOut(id, "python3", "-c", serverModules)
	if !strings.Contains(out, "jupyter_client: []") {
		t.Fatalf("the server imported jupyter_client to run a kernel: %s", out)
	}
	if !strings.Contains(out, "zmq: []") {
		t.Fatalf("the server imported pyzmq to speak to a kernel: %s", out)
	}
}

// testLaterModules: psutil and urllib.request, which the kernel's launcher
// leaves out of its start (stand-ins load them on first use), are the real
// modules in a cell, and ipykernel's own uses of them still work.
func testLaterModules(t *testing.T, c *client, id string) {
	got := c.py(id, "import sys, psutil, urllib.request, ipykernel.kernelbase as kb\n"+
		"(type(sys.modules['psutil']).__name__, psutil.Process().pid > 0, urllib.request.Request.__module__,\n"+
		" isinstance(kb.Kernel._process_children(get_ipython().kernel), list))")
	if want := "('module', True, 'urllib.request', True)"; got.text() != want {
		t.Fatalf("got %q, want %q: %+v", got.text(), want, got)
	}
}
