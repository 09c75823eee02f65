package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/testenv"
)

// TestShortLoadRun is the load run, small: 6 busybox creates at once
// across runc and gVisor while 4 API clients list, get, exec and upload
// for 30 s against a real ptd. It fails on any answer but 2xx and the
// documented 429/503, a create that does not end running, a sandbox not
// deleted after its delete, or anything of a deleted sandbox left on the
// host. It asserts no speed: the numbers are printed, not judged.
func TestShortLoadRun(t *testing.T) {
	testenv.RequiresRoot(t)
	testenv.RequiresCommand(t, "runc", "runsc")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Creates, cfg.Clients, cfg.Duration, cfg.Grace = 6, 4, 30*time.Second, 3*time.Minute
	d, err := startDaemon(root, cfg, "info")
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), cfg, Target{URL: d.URL, Token: d.Token, DataDir: d.DataDir, Bridge: d.Bridge, Cgroup: d.Cgroup, PID: d.PID()})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.Print(&out)
	t.Log("\n" + out.String())
	if n := rep.Created["runc"] + rep.Created["gvisor"]; n != cfg.Creates || rep.Created["gvisor"] == 0 {
		t.Errorf("%d of %d creates reached running (%v)", n, cfg.Creates, rep.Created)
	}
	for _, op := range []string{opList, opGet, opExec, opUpload} {
		if len(rep.Ops[op].lat) == 0 {
			t.Errorf("no %s succeeded in the run", op)
		}
	}
	if !rep.OK() {
		t.Errorf("the run found problems:\n%s\nptd's log ends:\n%s", out.String(), tail(d.Log(), 60))
	}

	// The leak check sees what a sandbox holds while it lives, so its
	// silence after the deletes means something.
	tg := Target{URL: d.URL, Token: d.Token, DataDir: d.DataDir, Bridge: d.Bridge, Cgroup: d.Cgroup, PID: d.PID()}
	baseline := runtimeProcesses(tg)
	c := &benchkit.Client{URL: d.URL, Token: d.Token}
	for _, class := range []string{"runc", "gvisor"} {
		st, b, err := c.Do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": "busybox", "runtime": class})
		var sb struct{ ID, State string }
		json.Unmarshal(b, &sb)
		if err != nil || st != 201 || sb.State != "running" {
			t.Fatalf("create %s: %d %s %v", class, st, b, err)
		}
		found := strings.Join(leaks(tg, []string{sb.ID}, baseline), "\n")
		for _, want := range []string{": mount ", ": loop device ", ": network namespace ", ": host veth ", ": cgroup ", ": directory ", "process "} {
			if !strings.Contains(found, want) {
				t.Errorf("a running %s sandbox shows no%s; the check found:\n%s", class, want, found)
			}
		}
		if err := c.Delete(sb.ID); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitGone(sb.ID); err != nil {
			t.Fatal(err)
		}
		if l := leaks(tg, []string{sb.ID}, baseline); len(l) > 0 {
			t.Errorf("after the delete of a %s sandbox: %v", class, l)
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
