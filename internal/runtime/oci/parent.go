package oci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// SetParentCPUWeight creates parent, the cgroup every sandbox's cgroup
// goes under, in the cpu controller and gives it weight (the cgroup v2
// cpu.weight scale, 1 to 10000, where a cgroup's default is 100; on v1 it
// is written as cpu.shares = weight×1024/100). The scheduler is
// work-conserving, so sandboxes still get every idle cycle; when they
// would take all cores, ptd (outside parent, at the default weight) keeps
// weight/(weight+100) of the contention on its side and its API answers
// (docs/ARCHITECTURE.md, "Idle and busy sandboxes").
func SetParentCPUWeight(parent string, weight int) error {
	if weight < 1 || weight > 10000 {
		return fmt.Errorf("cgroup cpu weight %d: want 1 to 10000", weight)
	}
	if parent == "" || parent == "/" || strings.Contains(parent, "..") {
		return fmt.Errorf("cgroup parent %q: want a path below the root", parent)
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return fmt.Errorf("cgroup mounts: %w", err)
	}
	for _, m := range mounts {
		if !m.v2 && slices.Contains(m.controllers, "cpu") {
			d := filepath.Join(m.dir, parent)
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			return writeCgroup(d, "cpu.shares", strconv.Itoa(max(2, weight*1024/100)))
		}
	}
	for _, m := range mounts {
		if !m.v2 {
			continue
		}
		// The parent's own parent must hand the cpu controller down.
		up := filepath.Join(m.dir, filepath.Dir(parent))
		b, err := os.ReadFile(filepath.Join(up, "cgroup.subtree_control"))
		if err != nil || !slices.Contains(strings.Fields(string(b)), "cpu") {
			if err := writeCgroup(up, "cgroup.subtree_control", "+cpu"); err != nil {
				return fmt.Errorf("enable the cpu controller under %s: %w", up, err)
			}
		}
		d := filepath.Join(m.dir, parent)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		return writeCgroup(d, "cpu.weight", strconv.Itoa(weight))
	}
	return fmt.Errorf("no cgroup hierarchy has the cpu controller")
}

// RemoveParent removes parent, under which every sandbox's cgroup went,
// from every hierarchy it is in (`ptd reset`, once the sandboxes are
// gone). Where a cgroup is still below it the parent stays: that is
// another data dir's sandbox, and is not reset's to end.
func RemoveParent(parent string) error {
	// Cleaned below a root, so that "" (which filepath.Clean makes ".")
	// is refused with "/" rather than named the hierarchies' roots.
	if strings.Trim(filepath.Clean("/"+parent), "/") == "" {
		return fmt.Errorf("cgroup parent %q: want a path below the root", parent)
	}
	var errs []error
	for _, d := range cgroupDirs(parent) {
		entries, err := os.ReadDir(d)
		if err != nil || slices.ContainsFunc(entries, os.DirEntry.IsDir) {
			continue
		}
		errs = append(errs, removeCgroupDir(d))
	}
	return errors.Join(errs...)
}
