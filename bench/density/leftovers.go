package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/platinum-dev/platinum/internal/host/network"
	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// leftovers lists what the run left on the host once its ptd was stopped
// and reset: loop devices and mounts of its data dir, each sandbox's
// network namespace, host veth and cgroup, the bridge, and processes that
// name the data dir (runc, runsc). ids are every sandbox the run made.
func leftovers(d *ptdtest.Daemon, ids []string) []string {
	var out []string
	devs, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range devs {
		if b, err := os.ReadFile(f); err == nil && strings.HasPrefix(string(b), d.DataDir+"/") {
			out = append(out, fmt.Sprintf("loop device %s backed by %s", strings.Split(f, "/")[3], strings.TrimSpace(string(b))))
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, d.DataDir+"/") || strings.Contains(line, " "+d.DataDir+" ") {
			out = append(out, "mount "+line)
		}
	}
	netCfg := network.DefaultConfig()
	netCfg.Bridge = d.Bridge
	for _, id := range ids {
		ns, veth := network.Names(netCfg, id)
		if exists(filepath.Join("/run/netns", ns)) {
			out = append(out, fmt.Sprintf("%s: network namespace %s", id, ns))
		}
		if exists(filepath.Join("/sys/class/net", veth)) {
			out = append(out, fmt.Sprintf("%s: host veth %s", id, veth))
		}
	}
	cgs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", d.Cgroup))
	if exists(filepath.Join("/sys/fs/cgroup", d.Cgroup, "cgroup.procs")) {
		cgs = append(cgs, filepath.Join("/sys/fs/cgroup", d.Cgroup))
	}
	for _, cg := range cgs {
		out = append(out, "cgroup "+cg)
	}
	if exists(filepath.Join("/sys/class/net", d.Bridge)) {
		out = append(out, "bridge "+d.Bridge)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(d.DataDir+"/")) {
			out = append(out, fmt.Sprintf("process %s: %.200s", strings.Split(f, "/")[2], bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	return out
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
