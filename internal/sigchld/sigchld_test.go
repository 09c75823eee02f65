package sigchld

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDrain: the signals queued behind the one received are taken, so a
// burst of exits costs one reap, and an empty queue returns at once.
func TestDrain(t *testing.T) {
	for _, queued := range []int{0, 1, 5, 16} {
		sigs := make(chan os.Signal, 16)
		for range queued {
			sigs <- unix.SIGCHLD
		}
		drain(sigs)
		if n := len(sigs); n != 0 {
			t.Errorf("%d queued: %d left after drain", queued, n)
		}
	}
}
