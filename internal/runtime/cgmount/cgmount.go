// Package cgmount lists the cgroup hierarchies mounted in this process's
// mount namespace, read from /proc/self/mountinfo: the OCI runtimes find
// their containers' cgroups through it, and runtimetest checks them from
// the host side.
package cgmount

import (
	"bufio"
	"os"
	"strings"
)

// Mount is one mounted cgroup hierarchy.
type Mount struct {
	// Dir is the mount point.
	Dir string
	// Root is the directory of the hierarchy mounted there ("/": all of
	// it).
	Root string
	// V2 is true for the unified hierarchy.
	V2 bool
	// Options are a v1 mount's super options, its controllers among
	// them; empty for v2.
	Options []string
}

// List returns every cgroup mount, in mountinfo's order. On a read error
// it returns the mounts read so far with the error.
func List() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts... - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(tail) < 3 {
			continue
		}
		switch tail[0] {
		case "cgroup2":
			out = append(out, Mount{Dir: fields[4], Root: fields[3], V2: true})
		case "cgroup":
			out = append(out, Mount{Dir: fields[4], Root: fields[3], Options: strings.Split(tail[2], ",")})
		}
	}
	return out, sc.Err()
}
