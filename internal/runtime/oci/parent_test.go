package oci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// TestSetParentCPUWeight: the sandboxes' parent cgroup is created with
// the weight asked for, in whichever cgroup version the host runs; bad
// weights and parents are refused.
func TestSetParentCPUWeight(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	parent := "/pt-weight-" + ptdtest.RandHex(4)
	t.Cleanup(func() { ptdtest.RemoveCgroup(parent) })
	if err := SetParentCPUWeight(parent, 20); err != nil {
		t.Fatal(err)
	}
	mounts, err := cgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	d, v2, ok := cgroupDir(mounts, "cpu", parent)
	if !ok {
		t.Fatalf("parent %s has no cpu controller after SetParentCPUWeight", parent)
	}
	file, want := "cpu.shares", "204"
	if v2 {
		file, want = "cpu.weight", "20"
	}
	b, err := os.ReadFile(filepath.Join(d, file))
	if err != nil || strings.TrimSpace(string(b)) != want {
		t.Fatalf("%s = %q (%v), want %s", file, b, err, want)
	}
	for _, bad := range []struct {
		parent string
		weight int
	}{{parent, 0}, {parent, 10001}, {"/", 20}, {"/a/../b", 20}} {
		if err := SetParentCPUWeight(bad.parent, bad.weight); err == nil {
			t.Errorf("SetParentCPUWeight(%q, %d) = nil, want an error", bad.parent, bad.weight)
		}
	}
}
