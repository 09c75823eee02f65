package oci

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/platinum-dev/platinum/internal/runtime"
)

// TestStateFromFiles: State answers "running" from the runtime's state file
// and the init's /proc entry, and leaves every other case (stopped, reused
// pid, created, paused, no state) to the runtime's own `state` — here
// /bin/false, so a case left to it is an error.
func TestStateFromFiles(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	self := os.Getpid()
	_, start, ok := procStat(self)
	if !ok {
		t.Fatal("procStat(self) failed")
	}
	// A process whose command line ends with the ID, as runsc-sandbox's does.
	const id = "sbx_test1"
	sb := exec.Command("/bin/sh", "-c", "sleep 600", "boot", id)
	if err := sb.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Process.Kill(); sb.Wait() })
	other := exec.Command("/bin/sh", "-c", "sleep 600", "boot", "sbx_other")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })

	type runcFiles struct {
		pid      int
		start    uint64
		fifo     bool
		freezer  string // "": no freezer path recorded
		v2freeze string
	}
	runcCases := []struct {
		name string
		f    runcFiles
		want bool
	}{
		{"running, v1 freezer thawed", runcFiles{pid: self, start: start, freezer: "THAWED"}, true},
		{"running, v2 not frozen", runcFiles{pid: self, start: start, v2freeze: "0"}, true},
		{"pid reused (other start time)", runcFiles{pid: self, start: start + 1, freezer: "THAWED"}, false},
		{"created: exec fifo still there", runcFiles{pid: self, start: start, fifo: true, freezer: "THAWED"}, false},
		{"paused, v1", runcFiles{pid: self, start: start, freezer: "FROZEN"}, false},
		{"paused, v2", runcFiles{pid: self, start: start, v2freeze: "1"}, false},
		{"no freezer recorded", runcFiles{pid: self, start: start}, false},
		{"init gone", runcFiles{pid: 1 << 30, start: start, freezer: "THAWED"}, false},
	}
	for _, tc := range runcCases {
		t.Run("runc/"+tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, id)
			cg := t.TempDir()
			paths := map[string]string{}
			if tc.f.freezer != "" {
				paths["freezer"] = cg
				writeFile(t, filepath.Join(cg, "freezer.state"), tc.f.freezer+"\n")
			}
			if tc.f.v2freeze != "" {
				paths[""] = cg
				writeFile(t, filepath.Join(cg, "cgroup.freeze"), tc.f.v2freeze+"\n")
			}
			writeJSON(t, filepath.Join(dir, "state.json"), map[string]any{
				"id": id, "init_process_pid": tc.f.pid, "init_process_start": tc.f.start, "cgroup_paths": paths})
			if tc.f.fifo {
				writeFile(t, filepath.Join(dir, "exec.fifo"), "")
			}
			checkState(t, &Runtime{cfg: Config{Root: root}, binary: "/bin/false"}, tc.want, tc.f.pid)
		})
	}

	runscCases := []struct {
		name   string
		status string
		pid    int
		want   bool
	}{
		{"running", "running", sb.Process.Pid, true},
		{"paused", "paused", sb.Process.Pid, false},
		{"stopped", "stopped", sb.Process.Pid, false},
		{"pid is another sandbox's", "running", other.Process.Pid, false},
		{"sandbox gone", "running", 1 << 30, false},
	}
	for _, tc := range runscCases {
		t.Run("runsc/"+tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeJSON(t, filepath.Join(root, id+"_sandbox:"+id+".state"), map[string]any{
				"id": id, "status": tc.status, "sandbox": map[string]any{"id": id, "pid": tc.pid}})
			checkState(t, &Runtime{cfg: Config{Root: root}, binary: "/bin/false", gvisor: true}, tc.want, tc.pid)
		})
	}

	t.Run("no state file", func(t *testing.T) {
		checkState(t, &Runtime{cfg: Config{Root: t.TempDir()}, binary: "/bin/false"}, false, 0)
	})
}

func checkState(t *testing.T, r *Runtime, running bool, pid int) {
	t.Helper()
	st, err := r.State(context.Background(), "sbx_test1")
	if running {
		if err != nil || st.Status != runtime.StatusRunning || st.Pid != pid {
			t.Fatalf("State = %+v, %v; want running with pid %d, told from the files", st, err, pid)
		}
		return
	}
	if err == nil {
		t.Fatalf("State = %+v; want the runtime's own state asked (an error from /bin/false)", st)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(b))
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
