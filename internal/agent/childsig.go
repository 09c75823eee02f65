package agent

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// A Go program started with SIGHUP or SIGINT ignored keeps them ignored
// (the runtime respects those two inherited SIG_IGNs and no others), and
// an ignored signal stays ignored across fork and exec, while every signal
// the runtime handles is reset to its default in the child. So an agent
// started that way (under `nohup`, SIGHUP; as a shell script's background
// job, SIGINT) would start every process deaf to hangups and interrupts: a
// terminal's close (SIGHUP to its process group) or a caller's SIGINT
// would do nothing. A sandbox's agent starts with defaults (runc resets
// them for the container's init, and gVisor's guest starts from them; the
// e2e suite's ptd starts ignoring both to keep that checked), so this is
// for an agent that is not a sandbox's init: its tests under `nohup`, a
// development run.
//
// inheritedIgnores are those two signals, and dropped the channel that
// takes them over: handling a signal makes the runtime reset it for
// children, and a full channel drops what the agent itself receives, so
// the agent goes on ignoring them as it did.
var (
	inheritedIgnores = []os.Signal{unix.SIGHUP, unix.SIGINT}
	dropped          = make(chan os.Signal, 1)
)

// childSignalsDefault makes the processes started after it get SIGHUP and
// SIGINT at their defaults even if this process was started with them
// ignored (see inheritedIgnores). New calls it: an agent starts nothing
// before it is made.
func childSignalsDefault() {
	for _, sig := range inheritedIgnores {
		if signal.Ignored(sig) {
			signal.Notify(dropped, sig)
		}
	}
}
