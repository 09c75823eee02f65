package oci

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	if got := CgroupChildren(parent); len(got) != 1 || got["sbx_x"] == nil || len(got["sbx_x"]) != 0 {
		t.Fatalf("CgroupChildren(%s) = %v, want sbx_x with no process", parent, got)
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

// TestCgroupChildrenProcs: the sweep's one call finds every sandbox cgroup
// under the parent with the processes in it (one read of the mount table
// for all of them), an empty one with none.
func TestCgroupChildrenProcs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	parent := "/pt-sweep-" + ptdtest.RandHex(4)
	t.Cleanup(func() { ptdtest.RemoveCgroup(parent) })
	dirs := map[string][]string{}
	for _, id := range []string{"sbx_a", "sbx_b"} {
		mounts, err := cgroupMounts()
		if err != nil || len(mounts) == 0 {
			t.Fatalf("cgroup mounts: %v %v", mounts, err)
		}
		for _, m := range mounts {
			d := filepath.Join(m.dir, parent, id)
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			dirs[id] = append(dirs[id], d)
		}
	}
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	pid := strconv.Itoa(sleep.Process.Pid)
	if err := os.WriteFile(filepath.Join(dirs["sbx_b"][0], "cgroup.procs"), []byte(pid), 0o644); err != nil {
		t.Fatal(err)
	}
	got := CgroupChildren(parent)
	if len(got) != 2 || got["sbx_a"] == nil || len(got["sbx_a"]) != 0 || len(got["sbx_b"]) != 1 || got["sbx_b"][0] != sleep.Process.Pid {
		t.Fatalf("CgroupChildren(%s) = %v, want sbx_a with no process and sbx_b with %s", parent, got, pid)
	}
}
