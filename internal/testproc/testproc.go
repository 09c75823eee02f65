// Package testproc stops the servers tests start (PostgreSQL in pgtest,
// ptd in ptdtest) the same way: the server's own shutdown signal first,
// SIGKILL if it has not exited in time, so a hung server never hangs the
// test's cleanup.
package testproc

import (
	"os"
	"time"
)

// grace is how long a server has to exit after its shutdown signal.
const grace = 15 * time.Second

// Stop sends sig to p and waits for exited to close (the goroutine that
// waits for p closes it); after grace it kills p and waits again.
func Stop(p *os.Process, exited <-chan struct{}, sig os.Signal) {
	p.Signal(sig)
	select {
	case <-exited:
	case <-time.After(grace):
		p.Kill()
		<-exited
	}
}
