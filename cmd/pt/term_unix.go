//go:build unix

package main

import (
	"os"
	"os/signal"
	"strconv"

	"golang.org/x/sys/unix"
)

// terminalWidth returns f's width in columns when f is a terminal, else 0.
// COLUMNS, when set, overrides the size the terminal reports, as it does
// for ls and friends.
func terminalWidth(f *os.File, getenv func(string) string) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0 // not a terminal: no width limit
	}
	if n, err := strconv.Atoi(getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return int(ws.Col)
}

// notifyResize calls f on every SIGWINCH until the returned stop runs.
func notifyResize(f func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, unix.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				f()
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}
