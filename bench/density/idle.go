package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// idleSide is one ptd whose idle sandboxes -idle measures: this tree's
// build, or the -baseline one.
type idleSide struct {
	name  string
	bin   string // "": build this tree
	runsc string // a directory whose runsc ptd uses, "": PATH's
	d     *ptdtest.Daemon
	c     *benchkit.Client
	ids   map[string][]string // class → sandboxes
}

// runIdle is -idle: n sandboxes per class on each side, created
// interleaved (one per side in turn), left alone for settle, then every
// sandbox's own host cgroup read at both ends of the same window: CPU
// (cpuacct.usage, or cpu.stat usage_usec on cgroup v2) and memory
// (memory.usage_in_bytes, or memory.current). Per sandbox, not per host,
// so what an idle sandbox costs is not lost in the host's other work.
func runIdle(ctx context.Context, root string, classes []string, n int, baseline string, cfg config) error {
	sides := []*idleSide{{name: "this tree"}}
	if baseline != "" {
		for _, dir := range strings.Split(baseline, ",") {
			bin, runsc, _ := strings.Cut(dir, "@")
			sides = append(sides, &idleSide{name: "baseline " + dir, bin: bin, runsc: runsc})
		}
	}
	for i, s := range sides {
		o := ptdtest.Options{RepoRoot: root, Subnet: fmt.Sprintf("100.%d.0.0/22", 120+4*i), ExtraArgs: []string{
			"--log-level", "warn", "--org-max-sandboxes", "0", "--org-max-cpu", "0", "--org-max-ram-mb", "0"}}
		o.BinDir = s.bin
		if s.runsc != "" {
			o.Env = []string{"PATH=" + s.runsc + ":" + os.Getenv("PATH")}
		}
		d, err := ptdtest.Start(o)
		defer d.Stop()
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		s.d, s.c, s.ids = d, &benchkit.Client{URL: d.URL, Token: d.Token}, map[string][]string{}
		if err := s.c.EnsureTemplate("busybox"); err != nil {
			return err
		}
	}
	defer func() {
		if ctx.Err() != nil {
			return // each side's ptd reset removes them
		}
		for _, s := range sides {
			for _, ids := range s.ids {
				for _, id := range ids {
					s.c.Delete(id)
				}
				for _, id := range ids {
					s.c.WaitGone(id)
				}
			}
		}
	}()
	fmt.Printf("Platinum idle cost: %d busybox sandboxes (%d vCPU, 128 MB) per class and side, %s after the last create, window %s, %s\n",
		n, cfg.idleCPU, cfg.settle, cfg.window, time.Now().UTC().Format(time.RFC3339))
	for range n {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for _, rt := range classes {
			for _, s := range sides {
				id, err := s.c.CreateRunning(rt, map[string]any{"template": "busybox", "runtime": rt, "cpu": cfg.idleCPU, "ram_mb": 128, "disk_gb": 1})
				if err != nil {
					return fmt.Errorf("%s %s: %w", s.name, rt, err)
				}
				s.ids[rt] = append(s.ids[rt], id)
			}
		}
	}
	if sleep(ctx, cfg.settle) != nil {
		return ctx.Err()
	}
	load0, _ := os.ReadFile("/proc/loadavg")
	type reading struct{ cpu, mem []int64 }
	read := func() (map[*idleSide]map[string]reading, error) {
		out := map[*idleSide]map[string]reading{}
		for _, s := range sides {
			out[s] = map[string]reading{}
			dirs, err := sandboxCgroups(s.d.Cgroup)
			if err != nil {
				return nil, err
			}
			for _, rt := range classes {
				var r reading
				for _, id := range s.ids[rt] {
					dir, ok := dirs[id]
					if !ok {
						return nil, fmt.Errorf("%s: no cgroup for sandbox %s under %s", s.name, id, s.d.Cgroup)
					}
					cpu, mem, err := cgroupUsage(dir)
					if err != nil {
						return nil, err
					}
					r.cpu, r.mem = append(r.cpu, cpu), append(r.mem, mem)
				}
				out[s][rt] = r
			}
		}
		return out, nil
	}
	t0 := time.Now()
	r0, err := read()
	if err != nil {
		return err
	}
	if sleep(ctx, cfg.window) != nil {
		return ctx.Err()
	}
	r1, err := read()
	if err != nil {
		return err
	}
	secs := time.Since(t0).Seconds()
	load1, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("load average before %s, after %s\n", strings.Join(strings.Fields(string(load0))[:3], " "), strings.Join(strings.Fields(string(load1))[:3], " "))
	fmt.Println("CPU is each sandbox's host cgroup, in % of one core (ms of CPU per minute); memory is its host cgroup's usage")
	for _, rt := range classes {
		for _, s := range sides {
			var pct []float64
			for i := range r0[s][rt].cpu {
				pct = append(pct, 100*float64(r1[s][rt].cpu[i]-r0[s][rt].cpu[i])/1e9/secs)
			}
			slices.Sort(pct)
			var sum float64
			for _, p := range pct {
				sum += p
			}
			mean := sum / float64(len(pct))
			var mem int64
			for _, m := range r1[s][rt].mem {
				mem += m
			}
			fmt.Printf("%-7s %-40s CPU mean %.3f%% (%.0f ms/min), min %.3f%%, max %.3f%%  memory mean %.1f MB\n", rt, s.name,
				mean, mean*600, pct[0], pct[len(pct)-1], float64(mem)/float64(len(pct))/(1<<20))
		}
	}
	return nil
}

// sandboxCgroups maps each sandbox ID to its host cgroup's directory (the
// cpuacct hierarchy on cgroup v1) under parent, which names it by the ID.
func sandboxCgroups(parent string) (map[string]string, error) {
	base := "/sys/fs/cgroup" + parent
	if _, err := os.Stat("/sys/fs/cgroup/cpuacct"); err == nil {
		base = "/sys/fs/cgroup/cpuacct" + parent
	}
	out := map[string]string{}
	err := filepath.WalkDir(base, func(p string, e os.DirEntry, err error) error {
		if err != nil || !e.IsDir() || p == base {
			return err
		}
		out[e.Name()] = p
		return nil
	})
	return out, err
}

// cgroupUsage reads a sandbox cgroup's CPU (ns) and memory (bytes). dir is
// in the cpuacct hierarchy on v1; memory is read from the memory one.
func cgroupUsage(dir string) (cpu, mem int64, err error) {
	if rel, ok := strings.CutPrefix(dir, "/sys/fs/cgroup/cpuacct"); ok {
		if cpu, err = readInt(filepath.Join(dir, "cpuacct.usage")); err != nil {
			return 0, 0, err
		}
		mem, err = readInt(filepath.Join("/sys/fs/cgroup/memory", rel, "memory.usage_in_bytes"))
		return cpu, mem, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
			us, _ := strconv.ParseInt(v, 10, 64)
			cpu = us * 1000
		}
	}
	mem, err = readInt(filepath.Join(dir, "memory.current"))
	return cpu, mem, err
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
