package oci

import "testing"

// BenchmarkCgroupMounts: one lookup of the cgroup hierarchies.
func BenchmarkCgroupMounts(b *testing.B) {
	for b.Loop() {
		if _, err := cgroupMounts(); err != nil {
			b.Fatal(err)
		}
	}
}
