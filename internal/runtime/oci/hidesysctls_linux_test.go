package oci

import (
	"os"
	"os/exec"
	"testing"
)

// TestHidingNetSysctlsLeavesTheMainThread: the private mount namespace
// runsc is started from is never entered by the process's main thread,
// whose namespace /proc/self shows every thread: after many starts,
// /proc/self/ns/mnt is still the one the process began in.
func TestHidingNetSysctlsLeavesTheMainThread(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (unshare of the mount namespace)")
	}
	before, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		cmd := exec.Command("true")
		if err := startHidingNetSysctls(cmd); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		if after, _ := os.Readlink("/proc/self/ns/mnt"); after != before {
			t.Fatalf("after %d starts the main thread is in %s, not %s", i+1, after, before)
		}
	}
}
