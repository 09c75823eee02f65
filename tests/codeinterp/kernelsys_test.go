package codeinterp

import (
	"fmt"
	"strings"
	"testing"
)

// testKernelPidAfterFork: the kernel's launcher caches os.getpid (a system
// call, dear under gVisor: docs/code-interpreter.md, "On gVisor") and
// refreshes it in a forked child, so os.fork and multiprocessing children
// see their own pid, read here from /proc/self/stat.
func testKernelPidAfterFork(t *testing.T, c *client, id string) {
	got := c.py(id, `import os, posix, multiprocessing
def real():
    with open('/proc/self/stat') as f:
        return int(f.read().split()[0])
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(w, b'%d %d' % (os.getpid(), real()))
    os._exit(0)
os.close(w)
child = [int(x) for x in os.read(r, 100).split()]
os.close(r)
os.waitpid(pid, 0)
ctx = multiprocessing.get_context('fork')
q = ctx.Queue()
p = ctx.Process(target=lambda q: q.put((os.getpid(), real())), args=(q,))
p.start()
mp = q.get(timeout=120)
p.join()
(os.getpid is not posix.getpid, os.getpid() == real() == posix.getpid(), child == [pid, pid], list(mp) == [p.pid, p.pid], pid != os.getpid())`)
	if want := "(True, True, True, True, True)"; got.text() != want {
		t.Fatalf("got %q, want %q (cached, parent, fork child, multiprocessing child, distinct): %+v", got.text(), want, got)
	}
}

// testOutputOrder: the kernel's IOPub thread now gets one wake-up for all
// that is queued before it runs; output from the cell and from a thread,
// flushed and not, still arrives whole and in order, before the result.
func testOutputOrder(t *testing.T, c *client, id string) {
	got := c.py(id, `import sys, threading
for i in range(300):
    print(i, flush=i % 7 == 0)
def f():
    for j in range(100):
        print('t%d' % j, flush=j % 3 == 0)
th = threading.Thread(target=f)
th.start()
th.join()
sys.stdout.flush()
print('end')
'done'`)
	var want strings.Builder
	for i := range 300 {
		fmt.Fprintf(&want, "%d\n", i)
	}
	for j := range 100 {
		fmt.Fprintf(&want, "t%d\n", j)
	}
	want.WriteString("end\n")
	if got.stdout() != want.String() || got.text() != "'done'" {
		t.Fatalf("stdout %q (want %d bytes in order), result %q", got.stdout(), want.Len(), got.text())
	}
	var types []string
	for _, e := range got {
		if len(types) == 0 || types[len(types)-1] != e.Type {
			types = append(types, e.Type)
		}
	}
	if strings.Join(types, ",") != "stdout,result,end" {
		t.Errorf("event order %v", types)
	}
}

// testSilentCellHead: a cell's response head waits for its first event
// (so a short cell's head, result and end leave in one write), but at most
// a moment: a cell that prints nothing for 60 s still gives its client the
// X-Execution-Id at once, to stop it by. stream returns once the head is
// in; were it held to the cell's end, the DELETE would come after the cell
// had ended (404) a minute later.
func testSilentCellHead(t *testing.T, c *client, id string) {
	s := c.stream(id, map[string]any{"code": "import time\ntime.sleep(60)\n'not reached'"})
	if !strings.HasPrefix(s.id, "exec_") {
		t.Fatalf("X-Execution-Id %q", s.id)
	}
	if r := c.do("DELETE", "/v1/sandboxes/"+id+"/code/executions/"+s.id, nil); r.Status != 204 {
		t.Fatalf("delete while the silent cell runs: %d %s", r.Status, r.Body)
	}
	got := s.rest()
	if e, ok := got.err(); !ok || e.Name != "Interrupted" || got.end().Status != "interrupted" || got.text() != "" {
		t.Errorf("deleted silent cell: %+v", got)
	}
}
