package testproc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A server set to die with the test process survives the end of the
// thread its starter ran on: tests that enter a network namespace lock a
// thread and let it end, and a Pdeathsig tied to that thread once killed
// the PostgreSQL server of a whole e2e run.
func TestStartOutlivesTheCallersThread(t *testing.T) {
	// Several starters at once, each holding its own locked thread until
	// all have started: the runtime never ends the main thread, and at
	// most one of them can be on it.
	const n = 4
	cmds := make([]*exec.Cmd, n)
	exited := make([]<-chan struct{}, n)
	var started sync.WaitGroup
	started.Add(n)
	for i := range n {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
			cmds[i] = exec.Command("sleep", "30")
			cmds[i].SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			var err error
			if exited[i], err = Start(cmds[i]); err != nil {
				t.Error(err)
			}
			started.Done()
			started.Wait()
		}()
	}
	started.Wait()
	for i, cmd := range cmds {
		if exited[i] != nil {
			t.Cleanup(func() { Stop(cmd.Process, exited[i], syscall.SIGTERM) })
		}
	}
	time.Sleep(500 * time.Millisecond)
	for i, cmd := range cmds {
		select {
		case <-exited[i]:
			t.Errorf("server %d died with its starter's thread: %v", i, cmd.ProcessState)
		default:
		}
	}
}
