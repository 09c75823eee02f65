package oci

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// TestRemoveCgroupEveryHierarchy: a sandbox's cgroup is removed from every
// mounted hierarchy, also those whose controllers ptd never sets (on a v1
// host runc makes the cgroup in blkio, devices, freezer and name=systemd
// too), and the sweep sees a cgroup that is left in only such a one.
func TestRemoveCgroupEveryHierarchy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	parent := "/pt-sweep-" + ptdtest.RandHex(4)
	path := parent + "/sbx_x"
	t.Cleanup(func() { ptdtest.RemoveCgroup(parent) })
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok || !strings.HasPrefix(post, "cgroup") {
			continue
		}
		d := filepath.Join(strings.Fields(pre)[4], path)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		made = append(made, d)
	}
	if len(made) == 0 {
		t.Fatal("no cgroup hierarchy is mounted")
	}
	if got := CgroupChildren(parent); len(got) != 1 || got[0] != "sbx_x" {
		t.Fatalf("CgroupChildren(%s) = %v, want [sbx_x]", parent, got)
	}
	if err := RemoveCgroup(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	for _, d := range made {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there after RemoveCgroup", d)
		}
	}
}
