package codeinterp

import (
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/testenv"
)

func TestWarmCreateRunc(t *testing.T) { testWarmCreate(t, "runc") }
func TestWarmCreateGVisor(t *testing.T) {
	testenv.RequiresCommand(t, "runsc")
	testWarmCreate(t, "gvisor")
}

// testWarmCreate: a code-interpreter create served from a warm pool
// (docs/code-interpreter.md, "The first result") is handed a sandbox whose
// pool waited for its default kernel, and its first cell is a first cell
// as in a cold one: the result, execution count 1, the environment the
// create asked for. Waiting for the kernel ran nothing in it.
func testWarmCreate(t *testing.T, runtime string) {
	c := newClient(t)
	setPool := func(n int) {
		r := c.do("PUT", "/v1/pools/code-interpreter", map[string]any{"runtime": runtime, "min_ready": n, "max": n})
		if r.Status != 200 {
			t.Fatalf("PUT pool: %d %s", r.Status, r.Body)
		}
	}
	setPool(1)
	t.Cleanup(func() { setPool(0) })
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		ready := 0
		for _, p := range c.do("GET", "/v1/pools", nil).JSON()["pools"].([]any) {
			if p := p.(map[string]any); p["template"] == "code-interpreter" && p["runtime"] == runtime {
				ready = int(p["ready"].(float64))
			}
		}
		if ready >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %s code-interpreter pool never had a ready sandbox", runtime)
		}
	}

	r := c.do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": "code-interpreter", "runtime": runtime,
		"env": map[string]any{"GREETING": "warm"}})
	if r.Status != 201 || r.JSON()["start"] != "warm" {
		t.Fatalf("create with a ready pool: %d %s, want 201 start warm", r.Status, r.Body)
	}
	id := r.JSON()["id"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
	out := c.py(id, "import os\nos.environ['GREETING'] + ' ' + str(1+1)")
	if got := out.text(); got != "'warm 2'" {
		t.Fatalf("first cell of a warm sandbox: %q, want 'warm 2': %+v", got, out)
	}
	if n := out.end().ExecutionCount; n == nil || *n != 1 {
		t.Fatalf("first cell's execution count %v, want 1 (the pool's wait for the kernel ran no cell): %+v", n, out.end())
	}
}
