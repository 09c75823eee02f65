//go:build !unix

package main

import "os"

// terminalWidth reports no width limit where pt cannot ask the terminal.
func terminalWidth(f *os.File, getenv func(string) string) int { return 0 }

// notifyResize has no resize signal to watch here.
func notifyResize(f func()) (stop func()) { return func() {} }
