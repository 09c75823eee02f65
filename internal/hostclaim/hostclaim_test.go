package hostclaim

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAcquire: a claim that shares a data dir, bridge, overlapping address
// pool or cgroup parent with a live one is refused, naming the other ptd
// and the flags to change; a disjoint one is not; a released or stale
// (unlocked) claim frees everything it named. Two opens of one file hold
// separate flocks, so one process stands for two daemons here.
func TestAcquire(t *testing.T) {
	dir := t.TempDir()
	first := Claim{DataDir: "/var/lib/platinum", Bridge: "pt0", Subnet: netip.MustParsePrefix("100.96.0.0/16"), CgroupParent: "/platinum"}
	h, err := Acquire(dir, first)
	if err != nil {
		t.Fatal(err)
	}
	other := Claim{DataDir: "/var/lib/other", Bridge: "pt1", Subnet: netip.MustParsePrefix("100.97.0.0/16"), CgroupParent: "/other"}
	for _, tc := range []struct {
		name      string
		change    func(*Claim)
		wantFlags []string
	}{
		{"same data dir", func(c *Claim) { c.DataDir = first.DataDir }, []string{"--data-dir"}},
		{"same bridge", func(c *Claim) { c.Bridge = "pt0" }, []string{"--bridge"}},
		{"overlapping pool", func(c *Claim) { c.Subnet = netip.MustParsePrefix("100.96.5.0/24") }, []string{"--subnet"}},
		{"same cgroup parent", func(c *Claim) { c.CgroupParent = "/platinum" }, []string{"--cgroup-parent"}},
		{"default flags twice", func(c *Claim) { c.Bridge, c.Subnet, c.CgroupParent = first.Bridge, first.Subnet, first.CgroupParent },
			[]string{"--bridge", "--subnet", "--cgroup-parent"}},
	} {
		c := other
		tc.change(&c)
		_, err := Acquire(dir, c)
		var ce *ConflictError
		if !errors.As(err, &ce) || ce.Other.PID != os.Getpid() || ce.Other.DataDir != first.DataDir || strings.Join(ce.Flags, " ") != strings.Join(tc.wantFlags, " ") ||
			!strings.Contains(err.Error(), first.DataDir) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	h2, err := Acquire(dir, other)
	if err != nil {
		t.Fatalf("disjoint claim: %v", err)
	}
	h2.Release()
	h.Release()
	h, err = Acquire(dir, Claim{DataDir: "/x", Bridge: "pt0", Subnet: first.Subnet, CgroupParent: "/platinum"})
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	h.Release()

	// A claim file nobody holds (its ptd died) is removed, not obeyed.
	stale := filepath.Join(dir, "dead.json")
	os.WriteFile(stale, []byte(`{"data_dir":"/dead","bridge":"pt0","cgroup_parent":"/platinum","pid":1}`), 0o644)
	h, err = Acquire(dir, first)
	if err != nil {
		t.Fatalf("with a stale claim: %v", err)
	}
	defer h.Release()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale claim kept: %v", err)
	}
}
