//go:build unix

package main

import (
	"os"
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
