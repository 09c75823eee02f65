package oci

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// openPidfd opens a pidfd of process pid. A pidfd works for any process,
// not only this one's children: a container a previous ptd started
// belongs to PID 1 now.
func openPidfd(pid int) (*os.File, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	return os.NewFile(uintptr(fd), "pidfd"), nil // non-blocking: pollable
}

// waitPidfd waits until pidfd's process has exited (true) or ctx ends
// (false), and closes pidfd. The wait parks the goroutine on the Go
// runtime's poller, not a thread.
func waitPidfd(ctx context.Context, pidfd *os.File) bool {
	defer pidfd.Close()
	rc, err := pidfd.SyscallConn()
	if err != nil {
		return false
	}
	stop := context.AfterFunc(ctx, func() { pidfd.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	exited := false
	err = rc.Read(func(fd uintptr) bool {
		// A pidfd polls readable once its process has exited.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, _ := unix.Poll(fds, 0)
		exited = n > 0
		return exited
	})
	return err == nil && exited
}
