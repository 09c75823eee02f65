package oci

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		in    string
		comm  string
		state byte
		ok    bool
	}{
		{"123 (exe) Z 1 0 0", "exe", 'Z', true},
		{"7 (a (b) c) S 1", "a (b) c", 'S', true},
		{"9 (pt-agent) R", "pt-agent", 'R', true},
		{"garbage", "", 0, false},
		{"1 (x)", "", 0, false},
	}
	for _, tt := range tests {
		comm, state, ok := parseStat([]byte(tt.in))
		if diff := cmp.Diff([]any{tt.comm, tt.state, tt.ok}, []any{comm, state, ok}); diff != "" {
			t.Errorf("parseStat(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

// TestReaperReapsOrphansOnly: an orphaned container process (comm "exe",
// as runsc's sandbox and gofer) that dies is reaped by this process at
// once, and the commands os/exec runs meanwhile still get their own exit
// statuses (the reaper never steals them).
func TestReaperReapsOrphansOnly(t *testing.T) {
	StartReaper(nil)
	dir := t.TempDir()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "exe")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// sh exits at once: its background child is re-parented to us.
	out, err := exec.Command("sh", "-c", exe+" 1000 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	waitFor(t, func() bool { return ppid(pid) == os.Getpid() }, "orphan re-parented to the test process")
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 50; i++ {
			if err := exec.Command("sh", "-c", "exit 3").Run(); err == nil || err.(*exec.ExitError).ExitCode() != 3 {
				done <- err
				return
			}
		}
		done <- nil
	}()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return os.IsNotExist(err)
	}, "orphan reaped")
	if err := <-done; err != nil {
		t.Fatalf("os/exec child lost its status: %v", err)
	}
}

func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	_, _, ok := parseStat(b)
	if !ok {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExitedLeavesTheStatus: exited answers no for a running child and for
// a pid that is not a child, yes once the child is a zombie, and leaves
// the zombie for os/exec's own Wait, whose status it must not steal.
func TestExitedLeavesTheStatus(t *testing.T) {
	if exited(os.Getpid()) {
		t.Error("exited(self) = true; want false (not a child)")
	}
	cmd := exec.Command("sh", "-c", "read x; exit 3")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	if exited(pid) {
		t.Fatal("exited(running child) = true")
	}
	stdin.Close() // the child exits
	for !exited(pid) {
		time.Sleep(time.Millisecond) // no deadline: the test's own timeout is the bound
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("Wait after exited: %v; want exit status 3", err)
	}
}
