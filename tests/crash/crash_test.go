// Package crash kills ptd with SIGKILL in the middle of lifecycle
// operations and checks that, after a restart, every sandbox reaches a
// stable state and nothing on disk is lost.
package crash

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

type api struct {
	t *testing.T
	d *ptdtest.Daemon
}

// do sends a request and decodes its JSON answer; a transport error fails
// the test.
func (a *api) do(method, path string, body any) (int, map[string]any) {
	a.t.Helper()
	st, m, err := a.try(method, path, body, nil)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	return st, m
}

// tagged lists the live sandboxes whose metadata has key=value: how a
// test finds what a create made when ptd died before answering it.
func (a *api) tagged(key, value string) []any {
	a.t.Helper()
	_, list := a.do("GET", "/v1/sandboxes?metadata["+key+"]="+url.QueryEscape(value), nil)
	rows, _ := list["rows"].([]any)
	return rows
}

func (a *api) waitState(id, want string, d time.Duration) map[string]any {
	a.t.Helper()
	deadline := time.Now().Add(d)
	var m map[string]any
	for time.Now().Before(deadline) {
		_, m = a.do("GET", "/v1/sandboxes/"+id+"?include_deleted=true", nil)
		if m["state"] == want {
			return m
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.t.Fatalf("sandbox %s: state %v, want %s (reason %v)", id, m["state"], want, m["reason"])
	return nil
}

// waitStable waits until the sandbox is in a state that is not transitional.
func (a *api) waitStable(id string, d time.Duration) map[string]any {
	a.t.Helper()
	deadline := time.Now().Add(d)
	var m map[string]any
	for time.Now().Before(deadline) {
		_, m = a.do("GET", "/v1/sandboxes/"+id+"?include_deleted=true", nil)
		if st, _ := m["state"].(string); !strings.HasSuffix(st, "ing") {
			return m
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.t.Fatalf("sandbox %s stuck in %v", id, m["state"])
	return nil
}

func (a *api) sh(id, script string) string {
	a.t.Helper()
	st, m := a.do("POST", "/v1/sandboxes/"+id+"/exec", map[string]any{"cmd": script})
	if st != 200 || m["exit_code"] != 0.0 {
		a.t.Fatalf("exec %q: %d %v", script, st, m)
	}
	return m["stdout"].(string)
}

func TestKillDuringLifecycleOperations(t *testing.T) {
	d, a := startDaemon(t)
	create := func(wait bool) string {
		path := "/v1/sandboxes"
		if wait {
			path += "?wait_for_state=running"
		}
		st, m := a.do("POST", path, map[string]any{"template": "busybox", "disk_gb": 1})
		if st != 201 {
			t.Fatalf("create: %d %v", st, m)
		}
		return m["id"].(string)
	}

	for round, delay := range []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond} {
		toStop := create(true)
		a.sh(toStop, "echo precious > /root/data")
		toStart := create(true)
		a.sh(toStart, "echo precious > /root/data")
		a.do("POST", "/v1/sandboxes/"+toStart+"/stop?wait_for_state=stopped", nil)
		toDelete := create(true)
		toArchive := create(true)
		a.sh(toArchive, "head -c 30000000 /dev/urandom > /root/data; sha256sum /root/data > /root/sum")
		a.do("POST", "/v1/sandboxes/"+toArchive+"/stop?wait_for_state=stopped", nil)

		// Fire the operations, then crash ptd while they are in flight.
		fresh := create(false)
		a.do("POST", "/v1/sandboxes/"+toStop+"/stop", nil)
		a.do("POST", "/v1/sandboxes/"+toStart+"/start", nil)
		a.do("DELETE", "/v1/sandboxes/"+toDelete, nil)
		a.do("POST", "/v1/sandboxes/"+toArchive+"/archive", nil)
		time.Sleep(delay)
		d.Kill()
		if err := d.Restart(); err != nil {
			t.Fatalf("round %d: restart: %v", round, err)
		}

		a.waitState(fresh, "running", 60*time.Second)
		a.waitState(toStop, "stopped", 60*time.Second)
		a.waitState(toStart, "running", 60*time.Second)
		a.waitState(toDelete, "deleted", 60*time.Second)
		if out := a.sh(toStart, "cat /root/data"); out != "precious\n" {
			t.Errorf("round %d: data after crash during start: %q", round, out)
		}
		a.do("POST", "/v1/sandboxes/"+toStop+"/start?wait_for_state=running", nil)
		a.waitState(toStop, "running", 60*time.Second)
		if out := a.sh(toStop, "cat /root/data"); out != "precious\n" {
			t.Errorf("round %d: data after crash during stop: %q", round, out)
		}
		a.sh(fresh, "true")
		// An archive interrupted by the crash ends archived or, failed
		// halfway, stopped with its local disk; either way the data is whole.
		m := a.waitStable(toArchive, 120*time.Second)
		if m["state"] != "archived" && m["state"] != "stopped" {
			t.Errorf("round %d: interrupted archive ended %v (%v)", round, m["state"], m["reason"])
		}
		a.do("POST", "/v1/sandboxes/"+toArchive+"/start?wait_for_state=running&wait_timeout_ms=120000", nil)
		a.waitState(toArchive, "running", 120*time.Second)
		a.sh(toArchive, "sha256sum -c /root/sum")
		if _, err := os.Stat(filepath.Join(d.DataDir, "sandboxes", toDelete)); !os.IsNotExist(err) {
			t.Errorf("round %d: deleted sandbox's files remain: %v", round, err)
		}
		for _, id := range []string{fresh, toStop, toStart, toArchive} {
			a.do("DELETE", "/v1/sandboxes/"+id, nil)
		}
	}
	// Nothing is left in a transitional state.
	_, m := a.do("GET", "/v1/sandboxes?limit=200", nil)
	for _, r := range m["rows"].([]any) {
		st := r.(map[string]any)["state"].(string)
		if strings.HasSuffix(st, "ing") && st != "deleting" {
			t.Errorf("sandbox left %s", st)
		}
	}
}
