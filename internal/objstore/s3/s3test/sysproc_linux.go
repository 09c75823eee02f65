package s3test

import "syscall"

// sysProcAttr kills the server if the test binary dies without cleanup.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
