package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReaper runs the reaper in a child test process that is a child
// subreaper (as good as PID 1 for orphans): a Wait4(-1) loop inside this
// test binary would steal the statuses of other tests' processes.
func TestReaper(t *testing.T) {
	if os.Getenv("PT_REAPER_HELPER") == "1" {
		reaperHelper(t)
		return
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestReaper$", "-test.v")
	cmd.Env = append(os.Environ(), "PT_REAPER_HELPER=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "reaper helper ok") {
		t.Fatalf("helper: %v\n%s", err, out)
	}
}

func reaperHelper(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := NewReaper()
	go r.Run(ctx)

	// Many children exiting at once, some leaving orphans behind: every
	// waiter gets its own child's status, none is lost to the reaper.
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			script := fmt.Sprintf("exit %d", i)
			if i%4 == 0 {
				script = fmt.Sprintf("sleep 0.05 & exit %d", i)
			}
			if i%5 == 0 {
				script = "kill -KILL $$"
			}
			pid, ch, err := r.spawn(func() (int, error) {
				return syscall.ForkExec("/bin/sh", []string{"sh", "-c", script}, &syscall.ProcAttr{})
			})
			if err != nil {
				errs <- err
				return
			}
			select {
			case ws := <-ch:
				want := "exit status " + strconv.Itoa(i)
				if i%5 == 0 {
					want = "signal: killed"
				}
				if got := statusString(ws); got != want {
					errs <- fmt.Errorf("child %d (%s): status %q, want %q", pid, script, got, want)
				}
			case <-ctx.Done():
				errs <- fmt.Errorf("child %d: no status", pid)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// The orphaned sleeps were re-parented to us and must not stay zombies.
	for {
		kids, zombies := children()
		if kids == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d children left (%d zombies)", kids, zombies)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Log("reaper helper ok")
}

// children counts this process's children and how many are zombies.
func children() (n, zombies int) {
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == self {
			n++
			if fields[0] == "Z" {
				zombies++
			}
		}
	}
	return n, zombies
}

func TestStatusString(t *testing.T) {
	tests := []struct {
		ws       unix.WaitStatus
		want     string
		wantCode int
	}{
		{unix.WaitStatus(0), "exit status 0", 0},
		{unix.WaitStatus(3 << 8), "exit status 3", 3},
		{unix.WaitStatus(9), "signal: killed", -1},
		{unix.WaitStatus(15), "signal: terminated", -1},
		{unix.WaitStatus(6 | 0x80), "signal: aborted (core dumped)", -1},
	}
	for _, tc := range tests {
		if got := statusString(tc.ws); got != tc.want {
			t.Errorf("statusString(%#x) = %q, want %q", uint32(tc.ws), got, tc.want)
		}
		if got := exitCode(tc.ws); got != tc.wantCode {
			t.Errorf("exitCode(%#x) = %d, want %d", uint32(tc.ws), got, tc.wantCode)
		}
	}
}
