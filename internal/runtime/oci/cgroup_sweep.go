package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupDirs returns the directory of cgroup path in every mounted
// hierarchy where it exists (v1 has one per controller group; v2 one).
func cgroupDirs(path string) []string {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil
	}
	return cgroupDirsIn(mounts, path)
}

// cgroupDirsIn is cgroupDirs over mounts already read: the mount table
// grows with the sandboxes (their rootfs mounts), and the kernel formats
// every line on each read, so a sweep reads it once, not once a sandbox.
func cgroupDirsIn(mounts []cgroupMount, path string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range mounts {
		d := filepath.Join(m.dir, filepath.Clean("/"+path))
		if seen[d] {
			continue
		}
		seen[d] = true
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// CgroupChildren returns the cgroups directly under parent in any mounted
// hierarchy (the host's sandbox cgroups, by sandbox ID), each with the
// processes in it (as CgroupProcs), reading the mount table once for all.
func CgroupChildren(parent string) map[string][]int {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil
	}
	out := map[string][]int{}
	for _, d := range cgroupDirsIn(mounts, parent) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if _, seen := out[e.Name()]; e.IsDir() && !seen {
				out[e.Name()] = procsIn(cgroupDirsIn(mounts, filepath.Join(parent, e.Name())))
			}
		}
	}
	return out
}

// CgroupProcs returns the processes in cgroup path (the union over every
// hierarchy, in which it is the same set when something put them there).
func CgroupProcs(path string) []int {
	return procsIn(cgroupDirs(path))
}

// procsIn is the union of the processes in dirs, one cgroup's directories.
func procsIn(dirs []string) []int {
	seen := map[int]bool{}
	out := []int{}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 && !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	return out
}

// RemoveCgroup ends every process left in cgroup path (SIGKILL, which a
// runtime that lost its state — a runsc sandbox whose state file is gone —
// can no longer do) and removes its directory in every hierarchy. A
// missing cgroup is no error.
func RemoveCgroup(ctx context.Context, path string) error {
	if strings.Trim(filepath.Clean(path), "/") == "" {
		return fmt.Errorf("remove cgroup %q: not a cgroup of its own", path)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		procs := CgroupProcs(path)
		if len(procs) == 0 {
			break
		}
		for _, pid := range procs {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("remove cgroup %s: %d processes still there", path, len(procs))
		}
		time.Sleep(20 * time.Millisecond)
	}
	var errs []error
	for _, d := range cgroupDirs(path) {
		// Children first (runc never makes any, but a v1 hierarchy
		// shared with another tool might).
		var sub []string
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() && p != d {
				sub = append(sub, p)
			}
			return nil
		})
		for i := len(sub) - 1; i >= 0; i-- {
			os.Remove(sub[i])
		}
		if err := removeCgroupDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeCgroupDir removes one cgroup directory, retrying while the kernel
// still counts exiting tasks in it (EBUSY).
func removeCgroupDir(d string) error {
	for i := 0; ; i++ {
		err := os.Remove(d)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || i == 50 {
			return fmt.Errorf("remove cgroup %s: %w", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
