// Package crashpoint lets crash tests end ptd with SIGKILL at a named step
// of an operation, the worst moment a real crash could pick, instead of
// guessing it with sleeps. The step comes from the PT_CRASH_AT environment
// variable (read once at start-up); unset, Hit is one comparison with an
// empty string.
package crashpoint

import (
	"os"
	"syscall"
)

// Env is the environment variable naming the step to crash at.
const Env = "PT_CRASH_AT"

var at = os.Getenv(Env)

// Hit kills the process with SIGKILL (nothing deferred runs, nothing is
// flushed, as in a power cut) if step is the one PT_CRASH_AT names.
func Hit(step string) {
	if at == "" || at != step {
		return
	}
	os.Stderr.WriteString("crashpoint: " + step + "\n")
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
