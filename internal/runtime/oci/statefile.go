package oci

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/platinum-dev/platinum/internal/runtime"
)

// The reconciler asks every running sandbox's runtime, every pass, whether
// its container still runs (docs/ARCHITECTURE.md, "Density"). `runc state`
// and `runsc state` are a process each (some 10 ms of CPU for runsc, more
// on a loaded host), so a host of 1,000 idle sandboxes spent a steady part
// of a core on the question alone. runningFromFiles answers it from the
// files the runtime itself reads for `state` (its state file under --root
// and the init's /proc entry), and only when they say "running"; anything
// else, or anything it cannot read, is left to the runtime's own `state`.

// procRoot is where runningFromFiles reads processes (a test's fake).
var procRoot = "/proc"

// runningFromFiles returns container id's state when the runtime's files
// show it running, and false when they do not or cannot tell.
func (r *Runtime) runningFromFiles(id string) (runtime.State, bool) {
	if !validID.MatchString(id) {
		return runtime.State{}, false
	}
	if r.gvisor {
		return runscRunning(r.cfg.Root, id)
	}
	return runcRunning(r.cfg.Root, id)
}

// runcRunning is what `runc state` reports as running: the init recorded
// in state.json is alive with the start time recorded for it (so not a
// reused pid), its exec fifo is gone (started, not just created), and its
// freezer cgroup is thawed (not paused).
func runcRunning(root, id string) (runtime.State, bool) {
	dir := filepath.Join(root, id)
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return runtime.State{}, false
	}
	var st struct {
		Pid     int               `json:"init_process_pid"`
		Start   uint64            `json:"init_process_start"`
		Cgroups map[string]string `json:"cgroup_paths"`
	}
	if json.Unmarshal(b, &st) != nil || st.Pid <= 0 {
		return runtime.State{}, false
	}
	state, start, ok := procStat(st.Pid)
	if !ok || start != st.Start || state == 'Z' || state == 'X' || state == 'x' {
		return runtime.State{}, false
	}
	if _, err := os.Lstat(filepath.Join(dir, "exec.fifo")); err == nil {
		return runtime.State{}, false // created, not started
	}
	if !thawed(st.Cgroups) {
		return runtime.State{}, false
	}
	return runtime.State{ID: id, Status: runtime.StatusRunning, Pid: st.Pid}, true
}

// thawed reports whether the container's freezer says it is not paused:
// freezer.state on cgroup v1, cgroup.freeze on v2.
func thawed(paths map[string]string) bool {
	if p, ok := paths["freezer"]; ok {
		b, err := os.ReadFile(filepath.Join(p, "freezer.state"))
		return err == nil && string(bytes.TrimSpace(b)) == "THAWED"
	}
	if p, ok := paths[""]; ok {
		b, err := os.ReadFile(filepath.Join(p, "cgroup.freeze"))
		return err == nil && string(bytes.TrimSpace(b)) == "0"
	}
	return false
}

// runscStateFiles returns runsc's state files of sandbox id under root.
// runsc names each <container>_sandbox:<sandbox>.state, and a ptd sandbox
// has one container, of the sandbox's own ID: that name is looked up
// first, and the directory is listed (a glob) only when it is missing. The
// glob read and matched every sandbox's files, three or four times per
// create and delete: 4% of ptd's CPU in a burst of gVisor creates (a perf
// profile of the cold-create bench).
func runscStateFiles(root, id string) []string {
	p := filepath.Join(root, id+"_sandbox:"+id+".state")
	if _, err := os.Stat(p); err == nil {
		return []string{p}
	}
	m, _ := filepath.Glob(filepath.Join(root, "*_sandbox:"+id+".state")) // validID admits no glob metacharacters
	return m
}

// runscRunning is what `runsc state` reports as running for a sandbox's
// root container: its state file says running and the sandbox process it
// names is alive and is that sandbox's (its command line ends with the
// container's ID, so a reused pid does not pass).
func runscRunning(root, id string) (runtime.State, bool) {
	m := runscStateFiles(root, id)
	if len(m) != 1 {
		return runtime.State{}, false
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		return runtime.State{}, false
	}
	var st struct {
		Status  string `json:"status"`
		Sandbox struct {
			Pid int `json:"pid"`
		} `json:"sandbox"`
	}
	if json.Unmarshal(b, &st) != nil || st.Status != string(runtime.StatusRunning) || st.Sandbox.Pid <= 0 {
		return runtime.State{}, false
	}
	state, _, ok := procStat(st.Sandbox.Pid)
	if !ok || state == 'Z' || state == 'X' || state == 'x' {
		return runtime.State{}, false
	}
	cmd, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(st.Sandbox.Pid), "cmdline"))
	if err != nil {
		return runtime.State{}, false
	}
	args := strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
	if args[len(args)-1] != id {
		return runtime.State{}, false
	}
	return runtime.State{ID: id, Status: runtime.StatusRunning, Pid: st.Sandbox.Pid}, true
}

// procStat returns a process's state letter and start time (clock ticks
// after boot), fields 3 and 22 of /proc/PID/stat.
func procStat(pid int) (state byte, start uint64, ok bool) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], start, true
}
