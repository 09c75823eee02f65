package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/host/network"
)

// leaks looks for what a deleted sandbox may leave on the host: a mount or
// loop device backed by one of its files, its network namespace or host
// veth, its cgroup, its directory in the data dir, a process naming it or
// living in its cgroup; and any runtime process of the data dir that was
// not there before the run (runc or runsc that no record owns). Every
// sandbox in ids must be deleted when it is called.
func leaks(t Target, ids []string, baseline map[int]string) []string {
	var out []string
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	loops := loopBackings()
	netCfg := network.DefaultConfig()
	netCfg.Bridge = t.Bridge
	for _, id := range ids {
		for _, line := range strings.Split(string(mounts), "\n") {
			if strings.Contains(line, id) {
				out = append(out, fmt.Sprintf("%s: mount %s", id, line))
			}
		}
		for dev, file := range loops {
			if strings.Contains(file, id) {
				out = append(out, fmt.Sprintf("%s: loop device %s backed by %s", id, dev, file))
			}
		}
		ns, veth := network.Names(netCfg, id)
		if _, err := os.Lstat(filepath.Join("/run/netns", ns)); err == nil {
			out = append(out, fmt.Sprintf("%s: network namespace %s", id, ns))
		}
		if _, err := os.Lstat(filepath.Join("/sys/class/net", veth)); err == nil {
			out = append(out, fmt.Sprintf("%s: host veth %s", id, veth))
		}
		cgs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", t.Cgroup, id))
		if d := filepath.Join("/sys/fs/cgroup", t.Cgroup, id); exists(d) {
			cgs = append(cgs, d)
		}
		for _, cg := range cgs {
			out = append(out, fmt.Sprintf("%s: cgroup %s", id, cg))
		}
		if d := filepath.Join(t.DataDir, "sandboxes", id); exists(d) {
			out = append(out, fmt.Sprintf("%s: directory %s", id, d))
		}
	}
	// Processes come and go (a teardown's last runc call may still be
	// exiting): only those seen twice, a second apart, count.
	first := processLeaks(t, ids, baseline)
	if len(first) > 0 {
		time.Sleep(time.Second)
		second := processLeaks(t, ids, baseline)
		for pid, what := range first {
			if second[pid] == what {
				out = append(out, what)
			}
		}
	}
	slices.Sort(out)
	return out
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// loopBackings maps each attached loop device to its backing file.
func loopBackings() map[string]string {
	out := map[string]string{}
	devs, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range devs {
		b, err := os.ReadFile(f)
		if err == nil {
			out[strings.Split(f, "/")[3]] = strings.TrimSpace(string(b))
		}
	}
	return out
}

// runtimeProcesses lists the processes whose command line names the data
// dir, but for ptd itself: runtime processes (runc, runsc) and anything
// they started.
func runtimeProcesses(t Target) map[int]string {
	out := map[int]string{}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		pid, _ := strconv.Atoi(strings.Split(f, "/")[2])
		if pid == t.PID || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte(t.DataDir)) {
			continue
		}
		out[pid] = strings.Join(strings.Fields(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))), " ")
	}
	return out
}

// processLeaks lists, by pid, the processes that name a deleted sandbox in
// their command line or cgroup, and the runtime processes of the data dir
// the baseline did not have.
func processLeaks(t Target, ids []string, baseline map[int]string) map[int]string {
	out := map[int]string{}
	for pid, cmd := range runtimeProcesses(t) {
		if baseline[pid] != cmd {
			out[pid] = fmt.Sprintf("process %d of the data dir: %.200s", pid, cmd)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	for _, f := range procs {
		pid, _ := strconv.Atoi(strings.Split(f, "/")[2])
		b, err := os.ReadFile(f)
		if err != nil || pid == os.Getpid() {
			continue
		}
		for _, id := range ids {
			if bytes.Contains(b, []byte(id)) {
				cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
				out[pid] = fmt.Sprintf("%s: process %d in its cgroup: %.200s", id, pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
			}
		}
	}
	return out
}
