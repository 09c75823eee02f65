package oci

import (
	"os/exec"
	"testing"
)

// BenchmarkReapOrphans: one pass of the reaper with 40 running children
// (a host with 20 gVisor sandboxes has a sandbox and a gofer process each).
func BenchmarkReapOrphans(b *testing.B) {
	var cmds []*exec.Cmd
	for range 40 {
		c := exec.Command("sleep", "1000")
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	b.Cleanup(func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	b.ResetTimer()
	for b.Loop() {
		reapOrphans()
	}
}
