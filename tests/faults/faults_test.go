// Package faults holds Platinum's fault-injection tests: each runs a real
// ptd (real runc and runsc, disks, namespaces) and breaks something under
// it while it works (the object store refusing, slowing or dropping
// connections through a fault-injecting proxy on loopback; the data dir's
// filesystem full; the runtime killed mid-checkpoint; pt-agent killed
// inside a sandbox), then checks that the operation failed or retried
// cleanly, nothing was left half-made, and the sandbox and its disk are as
// they were (docs/testing.md, "Faults").
package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/testenv"
)

// build holds the binaries every daemon of the package runs.
var build struct {
	root, bin string
	err       error
}

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "faults: must run as root in CI")
			return 1
		}
		return m.Run() // each test skips through testenv
	}
	build.root, build.err = filepath.Abs("../..")
	if build.err == nil {
		build.bin, build.err = ptdtest.Build(build.root)
	}
	defer os.RemoveAll(build.bin)
	return m.Run()
}

// startPtd starts a ptd on the package's build with extra flags and
// environment; the test's cleanup stops and resets it, printing the tail
// of its log when the test failed.
func startPtd(t *testing.T, o ptdtest.Options) *ptdtest.Daemon {
	t.Helper()
	testenv.RequiresRoot(t)
	if build.err != nil {
		t.Fatal(build.err)
	}
	o.RepoRoot, o.BinDir = build.root, build.bin
	o.ExtraArgs = append([]string{"--log-level", "debug", "--pids-limit", "256"}, o.ExtraArgs...)
	return ptdtest.StartTest(t, o, 80)
}

// api is a raw REST client for one daemon.
type api struct {
	t          *testing.T
	url, token string
}

func apiOf(t *testing.T, d *ptdtest.Daemon) *api { return &api{t: t, url: d.URL, token: d.Token} }

// do sends one request; body is JSON-encoded unless it is []byte.
func (a *api) do(method, path string, body any) (int, map[string]any, []byte) {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, _ := json.Marshal(b)
		rd = bytes.NewReader(js)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.url+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	return resp.StatusCode, m, b
}

// create makes a running busybox sandbox of class.
func (a *api) create(class string, extra map[string]any) string {
	a.t.Helper()
	body := map[string]any{"template": "busybox", "runtime": class}
	for k, v := range extra {
		body[k] = v
	}
	code, m, b := a.do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=300000", body)
	if code != 201 || m["state"] != "running" {
		a.t.Fatalf("create %s: %d %s", class, code, b)
	}
	return m["id"].(string)
}

// sh runs a shell command in the sandbox and returns its stdout; a
// non-zero exit fails the test.
func (a *api) sh(id, cmd string) string {
	a.t.Helper()
	code, m, b := a.do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": cmd, "timeout_ms": 120000})
	if code != 200 || m["exit_code"] != float64(0) {
		a.t.Fatalf("exec %q in %s: %d %s", cmd, id, code, b)
	}
	return m["stdout"].(string)
}

// get reads the sandbox's record.
func (a *api) get(id string) map[string]any {
	a.t.Helper()
	code, m, b := a.do("GET", "/v1/sandboxes/"+id+"?include_deleted=true", nil)
	if code != 200 {
		a.t.Fatalf("get %s: %d %s", id, code, b)
	}
	return m
}

// settle waits until the sandbox leaves the transitional states (or within
// runs out) and returns its record.
func (a *api) settle(id string, within time.Duration) map[string]any {
	a.t.Helper()
	deadline := time.Now().Add(within)
	for {
		m := a.get(id)
		switch m["state"] {
		case "creating", "starting", "stopping", "archiving", "restoring", "deleting":
			if time.Now().After(deadline) {
				a.t.Fatalf("sandbox %s still %s after %s: %v", id, m["state"], within, m)
			}
			time.Sleep(250 * time.Millisecond)
		default:
			return m
		}
	}
}

// stop stops the sandbox and waits until it is stopped.
func (a *api) stop(id string) {
	a.t.Helper()
	if code, _, b := a.do("POST", "/v1/sandboxes/"+id+"/stop", nil); code != 202 && code != 200 {
		a.t.Fatalf("stop %s: %d %s", id, code, b)
	}
	if m := a.settle(id, 3*time.Minute); m["state"] != "stopped" {
		a.t.Fatalf("stop %s: ended %v", id, m)
	}
}

// start starts the sandbox and waits until it runs.
func (a *api) start(id string) {
	a.t.Helper()
	if code, _, b := a.do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running&wait_timeout_ms=300000", nil); code != 200 {
		a.t.Fatalf("start %s: %d %s", id, code, b)
	}
}
