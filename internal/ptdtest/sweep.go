package ptdtest

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// A test process killed before its cleanup runs (a `go test -timeout`
// panic, SIGKILL) leaves its data dir's loop device, mounts, bridge and
// cgroup behind. Every Daemon records who owns its data dir, and Start
// resets the data dirs of owners that no longer run, so one killed run
// never breaks the next.

const ownerFile = "ptdtest-owner.json"

// owner is what `ptd reset` needs to remove a data dir's host resources.
type owner struct {
	PID    int    `json:"pid"`
	Bridge string `json:"bridge"`
	Subnet string `json:"subnet"`
	Cgroup string `json:"cgroup"`
}

func (d *Daemon) writeOwner() error {
	b, err := json.Marshal(owner{PID: os.Getpid(), Bridge: d.Bridge, Subnet: d.Subnet, Cgroup: d.Cgroup})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(d.DataDir, ownerFile), b, 0o600)
}

// sweepDead resets and removes the data dirs under /var/tmp whose owning
// test process is gone, with the ptd binary at ptd.
func sweepDead(ptd string) {
	dirs, _ := filepath.Glob("/var/tmp/pt-data-*")
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // another run's dir before it recorded its owner, or not ours
		}
		var o owner
		if json.Unmarshal(b, &o) != nil || o.PID <= 0 || alive(o.PID) || o.Bridge == "" {
			continue
		}
		if exec.Command(ptd, "reset", "--data-dir", dir, "--bridge", o.Bridge, "--subnet", o.Subnet,
			"--cgroup-parent", o.Cgroup).Run() != nil {
			continue // keep it for a later sweep rather than remove a mounted dir
		}
		RemoveCgroup(o.Cgroup)
		os.RemoveAll(dir)
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
