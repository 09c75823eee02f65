package oci

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/sigchld"
)

// Container processes outlive the runtime command that started them: runc's
// container init and runsc's sandbox and gofer processes are re-parented
// when `runc run --detach` / `runsc run|restore --detach` exits. By default
// they go to PID 1, and here PID 1 (the VM's init) reaps only every second
// or two. Meanwhile the dead process is a zombie that still answers
// kill(pid, 0), and `runsc delete` waits for exactly that: every stop of a
// gVisor sandbox waited ≈1.9 s for PID 1.
//
// StartReaper makes this process their child subreaper and reaps them
// itself, at once. It reaps only zombies whose command name marks them as
// container processes (reapComms), each with its own wait4(pid): never
// wait4(-1), which would steal the exit status of the commands os/exec runs
// (exec.Cmd.Wait would then fail with ECHILD). A child os/exec started
// never has one of those names: ptd runs runc, runsc, mount, mkfs…, by
// their own names.
//
// reapComms: runsc re-executes itself through /proc/self/exe for its
// sandbox and gofer (comm "exe"); a runc container's init is pt-agent.
var reapComms = map[string]bool{"exe": true, "pt-agent": true}

var reaperOnce sync.Once

// StartReaper makes the process a child subreaper and starts reaping
// orphaned container processes for the life of the process; later calls do
// nothing. Without it (or when the prctl fails) they stay PID 1's.
func StartReaper(logger *slog.Logger) {
	reaperOnce.Do(func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			if logger == nil {
				logger = slog.Default()
			}
			logger.Warn("child subreaper unavailable; PID 1 reaps container processes", "err", err)
			return
		}
		go sigchld.Loop(context.Background(), nil, reapPoll, reapOrphans)
	})
}

// reapPoll is the reaper's safety net beside SIGCHLD, which the kernel
// also sends for a child re-parented here already dead. Each pass reads
// every child's /proc stat, and every running runc sandbox's init is a
// child: a 1 s poll read 1,000 files a second on a host of 1,000 idle
// sandboxes (docs/ARCHITECTURE.md, "Idle and busy sandboxes").
const reapPoll = 30 * time.Second

// reapOrphans reaps every child that is a zombie and a container process.
func reapOrphans() {
	for _, pid := range children() {
		if !reapable(pid) {
			continue
		}
		for {
			var ws unix.WaitStatus
			_, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
	}
}

// children lists this process's child pids (every thread's). It reads
// /proc/self/task's entries itself: filepath.Glob would match and lstat
// each one first, and this runs on every SIGCHLD, which a burst of
// creates sends many of (docs/ARCHITECTURE.md, "Boots queue").
func children() []int {
	d, err := os.Open("/proc/self/task")
	if err != nil {
		return nil
	}
	tids, _ := d.Readdirnames(-1)
	d.Close()
	var out []int
	for _, tid := range tids {
		b, err := os.ReadFile("/proc/self/task/" + tid + "/children")
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(s); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// reapable reports whether pid is a zombie with one of reapComms. It asks
// the kernel first whether pid has exited (waitid with WNOWAIT, which
// leaves the zombie for whoever waits for it): most children are running
// sandboxes, and formatting their /proc stat costs far more than the
// question.
func reapable(pid int) bool {
	if !exited(pid) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	comm, state, ok := parseStat(b)
	return ok && state == 'Z' && reapComms[comm]
}

// exited reports whether child pid has exited and not been waited for.
// On an error it says yes, so that /proc decides.
func exited(pid int) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.ECHILD) {
			return false // not our child, or waited for already
		}
		return err != nil || info.Signo != 0
	}
}

// parseStat returns the command name and state from /proc/<pid>/stat
// ("pid (comm) S …"; comm may itself hold spaces and parentheses).
func parseStat(b []byte) (comm string, state byte, ok bool) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open || end+2 >= len(b) {
		return "", 0, false
	}
	return string(b[open+1 : end]), b[end+2], true
}
