// Command agentstart times how long init binaries take to start listening
// as a gVisor sandbox's init: `runsc run -d` of a busybox bundle written by
// ptd's own OCI config code (pinned to one core as a 1-CPU sandbox, the
// binary bind-mounted read-only at /.pt/pt-agent as the host mounts
// pt-agent), then TCP connects every 0.5 ms until the init accepts one.
// The sandbox gets a network namespace with loopback only, which the bench
// dials into from a thread of its own there. The binaries alternate run by run, so all see the same load, and
// each line gives the p50 of run (runsc run -d), ready (from run's return
// until the first accepted connection) and the sandbox cgroup's CPU time at
// ready. Root; go run ./bench/agentstart -bins a,b[,…] [-n 20].
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/runtime/oci"
	"github.com/platinum-dev/platinum/internal/template"
)

var (
	n      = flag.Int("n", 20, "runs per binary")
	bins   = flag.String("bins", "bin/pt-agent", "comma-separated init binaries (NAME=PATH or PATH); ENV=... after a colon adds environment: PATH:GOGC=off")
	stderr = flag.String("stderr", "", "a directory to keep each init's stdout and stderr in (ID.log), e.g. with GODEBUG=inittrace=1 in its environment")
	cpus   = flag.String("cpus", "1", "the cpuset to pin each sandbox to (\"\" leaves it unpinned)")
)

type candidate struct {
	name, path string
	env        []string
	run, ready []time.Duration
	cpu        []time.Duration
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "agentstart:", err)
		os.Exit(1)
	}
}

func run() error {
	var cands []*candidate
	for _, b := range strings.Split(*bins, ",") {
		c := &candidate{}
		parts := strings.Split(b, ":")
		c.path, c.env = parts[0], parts[1:]
		c.name = b
		if k, v, ok := strings.Cut(c.path, "="); ok {
			c.name, c.path = k, v
		}
		abs, err := filepath.Abs(c.path)
		if err != nil {
			return err
		}
		c.path = abs
		cands = append(cands, c)
	}
	dir, err := os.MkdirTemp("/var/tmp", "pt-agentstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rootfs := filepath.Join(dir, "rootfs")
	if err := template.BuildBusybox(context.Background(), rootfs); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(rootfs, ".pt"), 0o755); err != nil {
		return err
	}
	cfg := oci.GVisorConfig(filepath.Join(dir, "state"))
	rt, err := oci.New(cfg, nil)
	if err != nil {
		return err
	}
	cg := "/platinum-agentstart-" + ptdtest.RandHex(3)
	defer ptdtest.RemoveCgroup(cg)
	// The sandbox's namespace and the dialer's, joined by a veth pair (as
	// the host's bridge reaches a sandbox: gVisor's netstack answers on the
	// namespace's interface, not on the host's loopback).
	ns, peer := "pt-agentstart-"+ptdtest.RandHex(3), "pt-agentdial-"+ptdtest.RandHex(3)
	defer exec.Command("ip", "netns", "del", ns).Run()
	defer exec.Command("ip", "netns", "del", peer).Run()
	for _, args := range [][]string{
		{"netns", "add", ns}, {"netns", "add", peer},
		{"link", "add", "asv0", "netns", ns, "type", "veth", "peer", "name", "asv1", "netns", peer},
		{"-n", ns, "addr", "add", "10.254.77.2/24", "dev", "asv0"},
		{"-n", peer, "addr", "add", "10.254.77.1/24", "dev", "asv1"},
		{"-n", ns, "link", "set", "asv0", "up"}, {"-n", peer, "link", "set", "asv1", "up"},
		{"-n", ns, "link", "set", "lo", "up"}, {"-n", peer, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
	}
	nsPath := "/run/netns/" + ns
	dial, err := dialerIn("/run/netns/" + peer)
	if err != nil {
		return err
	}
	port := 40000
	for i := range *n {
		for j, c := range cands {
			port++
			if err := c.once(rt, dir, rootfs, cg, nsPath, fmt.Sprintf("as-%d-%d", i, j), port, dial); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
		}
	}
	for _, c := range cands {
		fmt.Printf("%s\n", c.name)
		benchkit.Report("  runsc run -d", c.run, nil)
		benchkit.Report("  ready after run", c.ready, nil)
		benchkit.Report("  sandbox CPU at ready", c.cpu, nil)
	}
	return nil
}

// dialerIn returns a function that connects to an address inside the
// network namespace at path, from a thread that joined it.
func dialerIn(path string) (func(addr string) error, error) {
	reqs := make(chan string)
	answers := make(chan error)
	errc := make(chan error)
	go func() {
		goruntime.LockOSThread() // never unlocked: the thread ends with the goroutine
		f, err := os.Open(path)
		if err == nil {
			err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
			f.Close()
		}
		errc <- err
		if err != nil {
			return
		}
		for addr := range reqs {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
			if err != nil {
				answers <- err
				continue
			}
			ap := netip.MustParseAddrPort(addr)
			err = unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()})
			unix.Close(fd)
			answers <- err
		}
	}()
	if err := <-errc; err != nil {
		return nil, err
	}
	return func(addr string) error { reqs <- addr; return <-answers }, nil
}

func (c *candidate) once(rt *oci.Runtime, dir, rootfs, cg, nsPath, id string, port int, dial func(string) error) error {
	bundle := filepath.Join(dir, id)
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(bundle)
	addr := "10.254.77.2:" + strconv.Itoa(port)
	spec := runtime.Spec{ID: id, BundleDir: bundle, RootFS: rootfs, Hostname: id, CgroupPath: cg + "/" + id,
		NetNSPath: nsPath,
		Resources: runtime.Resources{CPU: 1, MemoryBytes: 512 << 20, Pids: 1024, CPUs: *cpus},
		Args:      []string{"/.pt/pt-agent"},
		Env: append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"PT_AGENT_TOKEN=x", "PT_AGENT_ADDR=:" + strconv.Itoa(port), "PT_MEMORY_GUARD=poked"}, c.env...),
		Cwd:    "/",
		Mounts: []runtime.Mount{{Source: c.path, Destination: "/.pt/pt-agent", ReadOnly: true}},
	}
	if strings.HasSuffix(c.name, "@root") {
		// In the root filesystem, which gVisor serves with its own caching,
		// rather than a bind mount of a host file.
		b, err := os.ReadFile(c.path)
		if err != nil {
			return err
		}
		in := filepath.Join(rootfs, ".pt", id)
		if err := os.WriteFile(in, b, 0o755); err != nil {
			return err
		}
		defer os.Remove(in)
		spec.Args, spec.Mounts = []string{"/.pt/" + id}, nil
	}
	// runsc takes the interface's address into its netstack and leaves
	// the interface without it: give it back before each run.
	ns := filepath.Base(nsPath)
	if out, err := exec.Command("ip", "-n", ns, "addr", "replace", "10.254.77.2/24", "dev", "asv0").CombinedOutput(); err != nil {
		return fmt.Errorf("ip addr: %v: %s", err, out)
	}
	cmd, err := rt.RunCommand(context.Background(), spec)
	if err != nil {
		return err
	}
	if *stderr != "" {
		f, err := os.Create(filepath.Join(*stderr, id+".log"))
		if err != nil {
			return err
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(filepath.Join(bundle, "runc.log"))
		return fmt.Errorf("run: %w: %s", err, log)
	}
	t1 := time.Now()
	defer rt.Delete(context.Background(), id)
	for {
		if dial(addr) == nil {
			break
		}
		if time.Since(t1) > 30*time.Second {
			return errors.New("never listened")
		}
		time.Sleep(500 * time.Microsecond)
	}
	t2 := time.Now()
	c.run, c.ready = append(c.run, t1.Sub(t0)), append(c.ready, t2.Sub(t1))
	b, err := os.ReadFile("/sys/fs/cgroup/cpuacct" + spec.CgroupPath + "/cpuacct.usage")
	if err == nil {
		ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		c.cpu = append(c.cpu, time.Duration(ns))
	}
	return nil
}
