// Package testproc starts and stops the servers tests run (PostgreSQL in
// pgtest, versitygw in s3test, ptd in ptdtest) the same way: started from
// an OS thread kept for them, stopped with the server's own shutdown signal
// first and SIGKILL if it has not exited in time, so a hung server never
// hangs the test's cleanup.
package testproc

import (
	"os"
	"os/exec"
	"runtime"
	"time"
)

// grace is how long a server has to exit after its shutdown signal.
const grace = 15 * time.Second

// Start starts cmd and returns a channel closed once it has exited and
// been waited for.
//
// The child is forked from an OS thread locked for as long as it runs.
// The kernel sends a Pdeathsig when the thread that forked the child ends,
// not the process, and the Go runtime ends a thread whenever a goroutine
// that locked it returns (tests that enter a network namespace do that on
// purpose): forked from an ordinary thread, a server set to die with the
// test process could be killed in the middle of the run.
func Start(cmd *exec.Cmd) (<-chan struct{}, error) {
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}

// Stop sends sig to p and waits for exited to close; after grace it kills
// p and waits again.
func Stop(p *os.Process, exited <-chan struct{}, sig os.Signal) {
	p.Signal(sig)
	select {
	case <-exited:
	case <-time.After(grace):
		p.Kill()
		<-exited
	}
}
