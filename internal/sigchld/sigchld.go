// Package sigchld runs a reaper's loop: pt-agent, PID 1 of a sandbox, and
// ptd, the child subreaper of its container processes, both collect exited
// children as soon as SIGCHLD says there are some, with a slow poll in case
// a signal was coalesced or missed.
package sigchld

import (
	"context"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/unix"
)

// Loop calls reap at once, then on every SIGCHLD, every receive from kick
// (nil: none) and every poll, until ctx is done. The poll is a safety net
// only: a SIGCHLD that arrives while one is pending is coalesced with it,
// and reap collects every exited child at each call.
func Loop(ctx context.Context, kick <-chan struct{}, poll time.Duration, reap func()) {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGCHLD)
	defer signal.Stop(sigs)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		reap()
		select {
		case <-ctx.Done():
			return
		case <-sigs:
			drain(sigs) // one reap collects every child that has exited
		case <-kick:
		case <-tick.C:
		}
	}
}

// drain takes the signals already queued on sigs: a burst of exits queues
// one per child, and each reap looks at every child, so reaping once per
// queued signal made the work grow with the square of the burst.
func drain(sigs <-chan os.Signal) {
	for {
		select {
		case <-sigs:
		default:
			return
		}
	}
}
