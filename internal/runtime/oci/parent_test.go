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
	parent, mounts := weightedParent(t)
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

// TestRemoveParent: `ptd reset` removes the sandboxes' parent cgroup from
// every hierarchy, but not while a cgroup it did not remove is below it.
func TestRemoveParent(t *testing.T) {
	parent, mounts := weightedParent(t)
	// As runc leaves it: the parent in every hierarchy, a child in one.
	for _, m := range mounts {
		if err := os.MkdirAll(filepath.Join(m.dir, parent), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dirs := cgroupDirs(parent)
	child := filepath.Join(dirs[0], "sbx")
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := RemoveParent(parent); err != nil {
		t.Fatal(err)
	}
	if got := cgroupDirs(parent); len(got) != 1 || got[0] != dirs[0] {
		t.Fatalf("after RemoveParent with a child in %s: parent left in %v, want only there", dirs[0], got)
	}
	if err := os.Remove(child); err != nil {
		t.Fatal(err)
	}
	if err := RemoveParent(parent); err != nil {
		t.Fatal(err)
	}
	if got := cgroupDirs(parent); len(got) != 0 {
		t.Fatalf("after RemoveParent: parent left in %v", got)
	}
	for _, bad := range []string{"", "/", "//"} {
		if err := RemoveParent(bad); err == nil {
			t.Errorf("RemoveParent(%q) = nil, want an error", bad)
		}
	}
}

// weightedParent makes a parent cgroup of weight 20 for t (removed when
// it ends) and returns it with the host's cgroup mounts.
func weightedParent(t *testing.T) (string, []cgroupMount) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	parent := "/pt-parent-" + ptdtest.RandHex(4)
	t.Cleanup(func() { ptdtest.RemoveCgroup(parent) })
	if err := SetParentCPUWeight(parent, 20); err != nil {
		t.Fatal(err)
	}
	mounts, err := cgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	return parent, mounts
}
