package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// counterScript is the init of every checkpoint test. Its state lives in
// memory (the counter i, the report number n, an open descriptor, a file
// on the in-memory /dev/shm) and on disk (/tmp, /count.log). On SIGUSR1 it
// writes what it sees to /results.<n> and then creates /done.<n>.
//
// /count.log gets i after each increment, so a process restored from its
// checkpoint continues the sequence while one that started over would
// write 1 again: the log must be exactly 1, 2, 3, ...
const counterScript = `
	echo "$PT_TOKEN" > /tmp/marker
	echo "$PT_TOKEN" > /dev/shm/marker
	exec 3< /tmp/marker
	mkdir -p /www && echo "$PT_TOKEN" > /www/index.html
	httpd -p 8080 -h /www
	report=
	trap 'report=1' USR1
	i=0
	n=0
	while :; do
		i=$((i+1))
		echo $i >> /count.log
		if [ -n "$report" ]; then
			report=
			n=$((n+1))
			{
				echo "i=$i"
				echo "tmp=$(cat /tmp/marker)"
				echo "shm=$(cat /dev/shm/marker)"
				echo "fd=$(cat /proc/self/fd/3)"
			} > /results.$n
			: > /done.$n
		fi
		sleep 0.02
	done`

// counter is a running counterScript container.
type counter struct {
	*Container
	token string
	// reports is how many reports have been asked for.
	reports int
	// net is the namespace the container runs in, or nil.
	net *NetNS
}

func startCounter(t *testing.T, rt runtime.Runtime, withNet bool) *counter {
	t.Helper()
	return startCounterWith(t, rt, withNet, nil)
}

// startCounterWith is startCounter with the spec adjusted by mod first.
func startCounterWith(t *testing.T, rt runtime.Runtime, withNet bool, mod func(*runtime.Spec)) *counter {
	t.Helper()
	spec := NewSpec(t, counterScript)
	if mod != nil {
		mod(&spec)
	}
	token := randHex(t, 8)
	spec.Env = append(spec.Env, "PT_TOKEN="+token)
	c := &counter{token: token}
	if withNet {
		c.net = NewNetNS(t)
		spec.NetNSPath = c.net.Path
	}
	c.Container = Start(t, rt, spec)
	c.waitCount(t, 10)
	return c
}

// count returns the last value in /count.log (0 if none yet).
func (c *counter) count() int {
	log, _ := c.File("count.log")
	lines := strings.Fields(log)
	if len(lines) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(lines[len(lines)-1])
	return n
}

// waitCount waits until the counter has passed v.
func (c *counter) waitCount(t *testing.T, v int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the counter of %s to pass %d", c.ID(), v), func() bool { return c.count() > v })
}

// checkLog checks that /count.log is exactly 1..N: no restart, no gap.
func (c *counter) checkLog(t *testing.T) {
	t.Helper()
	log, _ := c.File("count.log")
	for i, f := range strings.Fields(log) {
		if f != strconv.Itoa(i+1) {
			t.Fatalf("count.log line %d = %q, want %d: the counter did not continue where it was", i+1, f, i+1)
		}
	}
}

// report asks the init for a report and checks it: the counter at least
// min, and the markers in /tmp, /dev/shm and the open descriptor intact.
func (c *counter) report(t *testing.T, rt runtime.Runtime, min int) {
	t.Helper()
	c.reports++
	if err := rt.Kill(context.Background(), c.ID(), syscall.SIGUSR1); err != nil {
		t.Fatalf("Kill(SIGUSR1): %v", err)
	}
	c.WaitFile(t, fmt.Sprintf("done.%d", c.reports))
	raw, _ := c.File(fmt.Sprintf("results.%d", c.reports))
	got := map[string]string{}
	for _, line := range strings.Split(raw, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	for _, k := range []string{"tmp", "shm", "fd"} {
		if got[k] != c.token {
			t.Errorf("%s marker = %q, want %q (report %d: %v)", k, got[k], c.token, c.reports, got)
		}
	}
	if i, err := strconv.Atoi(got["i"]); err != nil || i < min {
		t.Errorf("counter in memory = %q, want >= %d", got["i"], min)
	}
	if c.net != nil {
		if body := strings.TrimSpace(c.net.Get(t, 8080)); body != c.token {
			t.Errorf("GET from the host = %q, want %q", body, c.token)
		}
	}
}

// stopAndRestore checkpoints c without leaving it running, checks that it
// is gone, restores it from the image and checks that it continues.
func (c *counter) stopAndRestore(t *testing.T, rt runtime.Runtime, cp runtime.Checkpointer, imageDir string) {
	t.Helper()
	ctx := context.Background()
	if err := cp.Checkpoint(ctx, c.ID(), imageDir, runtime.CheckpointOptions{}); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	if _, err := rt.State(ctx, c.ID()); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("State after Checkpoint = %v, want ErrNotFound (the container is deleted)", err)
	}
	at := c.count()
	if err := cp.Restore(ctx, c.Spec, imageDir); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if st := c.State(t); st.Status != runtime.StatusRunning || st.Pid <= 0 {
		t.Fatalf("State after Restore = %+v, want running", st)
	}
	c.waitCount(t, at)
	c.report(t, rt, at)
	c.checkLog(t)
}

func testCheckpoint(t *testing.T, rt runtime.Runtime, cp runtime.Checkpointer) {
	c := startCounter(t, rt, true)
	c.report(t, rt, 1)
	c.stopAndRestore(t, rt, cp, filepath.Join(t.TempDir(), "image"))
}

// testCheckpointAsHostRuns checkpoints and restores, twice, a container set
// up the way the host runs sandboxes: its cgroup under a parent made for it
// (nothing else there yet), a cpuset, a pids limit and a network
// namespace. Restore goes through the same cgroup set-up as Run.
func testCheckpointAsHostRuns(t *testing.T, rt runtime.Runtime, cp runtime.Checkpointer) {
	c := startCounterWith(t, rt, true, func(s *runtime.Spec) {
		parent := "/platinum-" + s.ID + "-parent"
		s.CgroupPath = parent + "/" + s.ID
		s.Resources = runtime.Resources{CPU: 1, MemoryBytes: 256 << 20, Pids: 256, CPUs: "0"}
		// Registered before the container starts, so it runs after the
		// container's own cleanup (cleanups run last-in first-out): an
		// occupied cgroup cannot be removed.
		t.Cleanup(func() {
			for _, d := range cgroupDirs(parent) {
				removeCgroupTree(d)
			}
		})
	})
	dir := t.TempDir()
	for i := range 2 {
		c.stopAndRestore(t, rt, cp, filepath.Join(dir, fmt.Sprintf("image-%d", i)))
	}
	if got, err := hostCgroupFile(c.State(t).Pid, "cpuset", "cpuset.cpus", "cpuset.cpus.effective"); err != nil || got != "0" {
		t.Errorf("cpuset after restore = %q, %v; want 0", got, err)
	}
}

// testCheckpointFiveCycles is the resume-twice bug class: every cycle must
// keep processes, files and the network, not just the first.
func testCheckpointFiveCycles(t *testing.T, rt runtime.Runtime, cp runtime.Checkpointer) {
	c := startCounter(t, rt, true)
	dir := t.TempDir()
	for i := range 5 {
		c.stopAndRestore(t, rt, cp, filepath.Join(dir, fmt.Sprintf("image-%d", i)))
	}
}

// testCheckpointLeaveRunning checkpoints a running container that keeps
// running, then starts a copy of it (a fork) from the image under another
// ID: both count on, each from where it was.
func testCheckpointLeaveRunning(t *testing.T, rt runtime.Runtime, cp runtime.Checkpointer) {
	ctx := context.Background()
	src := startCounter(t, rt, false)
	pid := src.State(t).Pid
	image := filepath.Join(t.TempDir(), "image")
	if err := cp.Checkpoint(ctx, src.ID(), image, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
		t.Fatalf("Checkpoint(LeaveRunning): %v", err)
	}
	at := src.count()
	// The fork gets a copy of the source's disk, as the host layer gives it
	// a reflink copy. (The copy runs a little ahead of the image: the source
	// kept running.)
	spec := NewSpec(t, counterScript)
	if out, err := exec.Command("cp", "-a", src.Spec.RootFS+"/.", spec.RootFS).CombinedOutput(); err != nil {
		t.Fatalf("copy rootfs: %v: %s", err, out)
	}
	spec.Env = src.Spec.Env

	if st := src.State(t); st.Status != runtime.StatusRunning || st.Pid != pid {
		t.Fatalf("source after Checkpoint(LeaveRunning) = %+v, want running with pid %d", st, pid)
	}
	src.waitCount(t, at+5)
	src.report(t, rt, at)
	src.checkLog(t)

	t.Cleanup(func() { cleanup(t, rt, spec) })
	if err := cp.Restore(ctx, spec, image); err != nil {
		t.Fatalf("Restore under a new ID: %v", err)
	}
	// The image was taken before the source's first report.
	fork := &counter{Container: &Container{Spec: spec, rt: rt}, token: src.token}
	if st := fork.State(t); st.Status != runtime.StatusRunning || st.Pid == pid {
		t.Fatalf("fork = %+v, want running with its own pid", st)
	}
	// The copy's log ran ahead of the image; the fork's process continues
	// from the image's counter, not from the copied file.
	fork.waitCount(t, fork.count()+5)
	fork.report(t, rt, at)
	if st := src.State(t); st.Status != runtime.StatusRunning {
		t.Errorf("source after the fork = %+v, want running", st)
	}
	src.waitCount(t, src.count()+5)
}

func testCheckpointErrors(t *testing.T, rt runtime.Runtime, cp runtime.Checkpointer) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := cp.Checkpoint(ctx, "rtt-absent-"+randHex(t, 4), filepath.Join(dir, "absent"), runtime.CheckpointOptions{}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Checkpoint(absent) = %v, want ErrNotFound", err)
	}

	c := Start(t, rt, NewSpec(t, ": > /done; "+sleepForever))
	c.WaitFile(t, "done")
	full := filepath.Join(dir, "full")
	if err := os.MkdirAll(full, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cp.Checkpoint(ctx, c.ID(), full, runtime.CheckpointOptions{}); !errors.Is(err, sandbox.ErrAlreadyExists) {
		t.Errorf("Checkpoint into a non-empty dir = %v, want ErrAlreadyExists", err)
	}
	if st := c.State(t); st.Status != runtime.StatusRunning {
		t.Fatalf("container after a refused Checkpoint = %+v, want running", st)
	}

	other := NewSpec(t, sleepForever)
	empty := filepath.Join(dir, "empty")
	if err := os.MkdirAll(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := cp.Restore(ctx, other, empty); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("Restore from an empty dir = %v, want ErrInvalidArgument", err)
	}
	if _, err := rt.State(ctx, other.ID); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("State after a refused Restore = %v, want ErrNotFound", err)
	}

	image := filepath.Join(dir, "image")
	if err := cp.Checkpoint(ctx, c.ID(), image, runtime.CheckpointOptions{LeaveRunning: true}); err != nil {
		t.Fatalf("Checkpoint(LeaveRunning): %v", err)
	}
	if err := cp.Restore(ctx, c.Spec, image); !errors.Is(err, sandbox.ErrAlreadyExists) {
		t.Errorf("Restore over a running container = %v, want ErrAlreadyExists", err)
	}
	if st := c.State(t); st.Status != runtime.StatusRunning {
		t.Fatalf("container after a refused Restore = %+v, want running", st)
	}

	if err := rt.Kill(ctx, c.ID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.WaitStatus(t, runtime.StatusStopped)
	if err := cp.Checkpoint(ctx, c.ID(), filepath.Join(dir, "stopped"), runtime.CheckpointOptions{}); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("Checkpoint(stopped) = %v, want ErrConflict", err)
	}
}
