// Command density measures what idle sandboxes cost one host: for each
// runtime class it creates busybox sandboxes in steps (-steps 10,100,300)
// and, at each step once they have settled, reports the host's CPU use
// over a quiet window, the host memory they hold (each), ptd's own CPU,
// memory and goroutines, and GET /v1/sandboxes/{id} latency and rate
// beside GET /healthz measured in the same round. With -busy it then
// starts a busy loop in every sandbox and measures the API again, with
// every core saturated by sandbox work (-busy-sandboxes of them, 50 by
// default). Interrupted (SIGINT, SIGTERM), it stops filling and removes
// everything it made: its ptd's reset takes the sandboxes, loop devices,
// cgroups, netns and bridge. With -idle N it instead measures
// what each of N idle sandboxes per class costs, from its own host cgroup
// (idle.go), beside -baseline builds in the same window. It starts its own
// ptd, so it needs root and scripts/setup.sh.
//
//	go run ./bench/density [-runtimes runc,gvisor] [-steps 10,100,300] [-busy] [-busy-sandboxes 50]
//	go run ./bench/density -idle 4 [-idle-cpu 1] [-window 120s] [-baseline DIR[@RUNSCDIR],...]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/ptdtest"
)

func main() { benchkit.Main("bench/density", run) }

type config struct {
	steps          []int
	parallel       int
	settle, window time.Duration
	round          time.Duration
	conns          int
	busy           bool
	busyN          int
	execs          int
	idleCPU        int
}

func run() error {
	runtimes := flag.String("runtimes", "runc,gvisor", "runtime classes, in order")
	steps := flag.String("steps", "10,100,300", "idle sandboxes at each step, ascending")
	cfg := config{}
	flag.IntVar(&cfg.parallel, "c", 4, "creates at once while filling a step")
	flag.DurationVar(&cfg.settle, "settle", 10*time.Second, "wait after a step's last create before measuring")
	flag.DurationVar(&cfg.window, "window", 10*time.Second, "quiet window over which CPU use is measured")
	flag.DurationVar(&cfg.round, "round", 3*time.Second, "length of each API round (healthz, then the GET)")
	flag.IntVar(&cfg.conns, "conns", 8, "connections sending GETs in an API round")
	flag.BoolVar(&cfg.busy, "busy", true, "also measure the API with a busy loop in -busy-sandboxes sandboxes")
	flag.IntVar(&cfg.busyN, "busy-sandboxes", 50, "with -busy: how many of the step's sandboxes spin (0: every one)")
	flag.IntVar(&cfg.execs, "execs", 20, "execs of `true`, one at a time across the step's sandboxes that do not spin, after the GET round (0: none)")
	idle := flag.Int("idle", 0, "instead of the steps: this many idle sandboxes per class, each one's own host cgroup CPU and memory over -window")
	flag.IntVar(&cfg.idleCPU, "idle-cpu", 1, "with -idle: vCPUs of each sandbox (gVisor's systrap fast path is only used with more than one)")
	subnet := flag.String("subnet", "100.120.0.0/22", "the sandbox subnet of the run's ptd (a /22 holds 1,000; another run at once needs another)")
	baseline := flag.String("baseline", "", "with -idle: also a ptd from the binaries in each of these directories (comma-separated; scripts/build.sh's bin/ of another commit; DIR@RUNSCDIR: with the runsc in RUNSCDIR), measured in the same window")
	flag.Parse()
	for _, s := range strings.Split(*steps, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 || (len(cfg.steps) > 0 && n <= cfg.steps[len(cfg.steps)-1]) {
			return fmt.Errorf("-steps %q: want ascending positive counts", *steps)
		}
		cfg.steps = append(cfg.steps, n)
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	// On the first SIGINT or SIGTERM the run stops where it is and its
	// defers remove what it made; a second one ends it at once (the next
	// run's ptdtest.Start resets what that left).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
		fmt.Fprintln(os.Stderr, "bench/density: interrupted, removing every sandbox (ptd reset)")
	}()
	if *idle > 0 {
		var classes []string
		for _, rt := range strings.Split(*runtimes, ",") {
			classes = append(classes, strings.TrimSpace(rt))
		}
		return runIdle(ctx, root, classes, *idle, *baseline, cfg)
	}
	// A /22 holds 1,000 sandboxes; no org quota; one sandbox's memory
	// limit is small so the host's admission counts what idle ones hold.
	d, err := ptdtest.Start(ptdtest.Options{RepoRoot: root, Subnet: *subnet, ExtraArgs: []string{
		"--log-level", "warn", "--org-max-sandboxes", "0", "--org-max-cpu", "0", "--org-max-ram-mb", "0"}})
	var made []string // every sandbox created, for the leftovers check
	defer func() {
		if err := d.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench/density:", err)
		}
		if d == nil || d.DataDir == "" {
			return
		}
		if left := leftovers(d, made); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "bench/density: left on the host after ptd's reset:\n  %s\n", strings.Join(left, "\n  "))
		} else {
			fmt.Printf("\nleft on the host after ptd's reset (%d sandboxes made): nothing (loop devices, mounts, netns, veths, cgroups, bridge, runtime processes)\n", len(made))
		}
	}()
	if err != nil {
		return err
	}
	c := &benchkit.Client{URL: d.URL, Token: d.Token}
	if err := c.EnsureTemplate("busybox"); err != nil {
		return err
	}
	fmt.Printf("Platinum density: busybox sandboxes (1 vCPU, 128 MB) idle in steps %v, %s\n", cfg.steps, time.Now().UTC().Format(time.RFC3339))
	fmt.Println("host CPU and ptd CPU are percent of the whole host (all cores); sandbox CPU is the sandboxes' own host cgroups, in % of one core each;")
	fmt.Println("host memory is what the host gave up (MemTotal-MemAvailable) since before the class's first sandbox, cgroup memory the sandboxes' own cgroups;")
	fmt.Println("ptd RSS and goroutines are the whole daemon, with what each sandbox added since the class's first")
	for _, rt := range strings.Split(*runtimes, ",") {
		if err := measureClass(ctx, c, d, strings.TrimSpace(rt), cfg, &made); err != nil {
			return fmt.Errorf("%s: %w", rt, err)
		}
	}
	return nil
}

// measureClass fills the steps with sandboxes of one class, measuring at
// each, then deletes them all and waits until they are gone. Interrupted,
// it returns at once and leaves the removal to ptd's reset.
func measureClass(ctx context.Context, c *benchkit.Client, d *ptdtest.Daemon, rt string, cfg config, made *[]string) error {
	base, err := readBase(d)
	if err != nil {
		return err
	}
	var ids []string
	defer func() {
		if ctx.Err() != nil {
			return
		}
		deleteAll(c, ids)
	}()
	fmt.Printf("\n%s (before the first sandbox: ptd RSS %d MB, %d goroutines)\n", rt, base.rss>>20, base.goroutines)
	for _, n := range cfg.steps {
		t0 := time.Now()
		more, err := createMany(ctx, c, rt, n-len(ids), cfg.parallel)
		ids = append(ids, more...)
		*made = append(*made, more...)
		fill := time.Since(t0)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			fmt.Printf("%5d sandboxes: stopped filling at %d: %v\n", n, len(ids), err)
			return nil
		}
		if sleep(ctx, cfg.settle) != nil {
			return ctx.Err()
		}
		idle, err := measure(ctx, c, d, ids, 0, base, cfg)
		if err != nil {
			return err
		}
		fmt.Printf("%5d idle  (filled in %s)  %s\n", n, fill.Round(time.Millisecond), idle)
		if !cfg.busy {
			continue
		}
		spin := ids
		if cfg.busyN > 0 && cfg.busyN < len(ids) {
			spin = ids[:cfg.busyN]
		}
		pids, err := startBusy(c, spin)
		if err == nil {
			var busy string
			busy, err = measure(ctx, c, d, ids, len(spin), base, cfg)
			if err == nil {
				fmt.Printf("%5d busy  (%d spinning)  %s\n", n, len(spin), busy)
			}
		}
		stopBusy(c, pids)
		if err != nil {
			return err
		}
	}
	return nil
}

// deleteAll deletes ids, a few at a time, and waits until each is gone.
func deleteAll(c *benchkit.Client, ids []string) {
	eightAtOnce(ids, func(id string) {
		if c.Delete(id) == nil {
			c.WaitGone(id)
		}
	})
}

// eightAtOnce calls f on each item, eight calls at a time.
func eightAtOnce[T any](items []T, f func(T)) {
	next := make(chan T, len(items))
	for _, it := range items {
		next <- it
	}
	close(next)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for it := range next {
				f(it)
			}
		})
	}
	wg.Wait()
}

// sleep waits for d or until ctx is done, and returns ctx's error then.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// createMany creates n running sandboxes of class rt, parallel at once,
// stopping early when ctx is done.
func createMany(ctx context.Context, c *benchkit.Client, rt string, n, parallel int) ([]string, error) {
	var mu sync.Mutex
	var ids []string
	var firstErr error
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for range next {
				if ctx.Err() != nil {
					return
				}
				id, err := c.CreateRunning(rt, map[string]any{"template": "busybox", "runtime": rt, "cpu": 1, "ram_mb": 128, "disk_gb": 1})
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					ids = append(ids, id)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return ids, firstErr
}

// base is what the host and ptd held before a class's first sandbox.
type base struct {
	mem, rss   int64
	goroutines int
}

func readBase(d *ptdtest.Daemon) (base, error) {
	var b base
	var err error
	if b.mem, err = hostMemUsed(); err != nil {
		return b, err
	}
	if b.rss, err = procRSS(d.PID()); err != nil {
		return b, err
	}
	b.goroutines, err = goroutines(d.MetricsURL)
	return b, err
}

// measure takes one step's figures: the host's, ptd's and the sandboxes'
// own cgroups' CPU over the quiet window, memory, ptd's goroutines, then
// one healthz round, one GET round and -execs execs; the first busy of
// ids run a busy loop.
func measure(ctx context.Context, c *benchkit.Client, d *ptdtest.Daemon, ids []string, busy int, b base, cfg config) (string, error) {
	load, _ := os.ReadFile("/proc/loadavg")
	h0, p0, err := cpuTicks(d.PID())
	if err != nil {
		return "", err
	}
	s0, _, err := sandboxesUsage(d, ids)
	if err != nil {
		return "", err
	}
	t0 := time.Now()
	if sleep(ctx, cfg.window) != nil {
		return "", ctx.Err()
	}
	h1, p1, err := cpuTicks(d.PID())
	if err != nil {
		return "", err
	}
	s1, cgMem, err := sandboxesUsage(d, ids)
	if err != nil {
		return "", err
	}
	secs := time.Since(t0).Seconds()
	mem, err := hostMemUsed()
	if err != nil {
		return "", err
	}
	rss, err := procRSS(d.PID())
	if err != nil {
		return "", err
	}
	gor, err := goroutines(d.MetricsURL)
	if err != nil {
		return "", err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.conns}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	health, err := benchkit.Hammer(hc, d.URL+"/healthz", "", cfg.conns, cfg.round)
	if err != nil {
		return "", fmt.Errorf("healthz: %w", err)
	}
	get, err := benchkit.Hammer(hc, d.URL+"/v1/sandboxes/"+ids[len(ids)-1], d.Token, cfg.conns, cfg.round)
	if err != nil {
		return "", fmt.Errorf("GET: %w", err)
	}
	// Execs go to sandboxes that do not spin (the busy ones are the first
	// busy of ids): an exec into a sandbox whose one vCPU its own loop
	// holds measures that sandbox, not the host.
	var execs []time.Duration
	if quiet := ids[min(busy, len(ids)):]; len(quiet) > 0 {
		for i := range cfg.execs {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			t := time.Now()
			if _, err := c.Exec(quiet[len(quiet)-1-i%len(quiet)], []string{"true"}); err != nil {
				return "", err
			}
			execs = append(execs, time.Since(t))
		}
	}
	hp, gp := benchkit.Percentiles(health), benchkit.Percentiles(get)
	n := float64(len(ids))
	host := 100 * float64(h1.busy-h0.busy) / float64(h1.total-h0.total)
	ptd := 100 * float64(p1[0]-p0[0]) / float64(h1.total-h0.total)
	kids := 100 * float64(p1[1]-p0[1]) / float64(h1.total-h0.total)
	var sbx, sbxMax float64 // % of one core: all sandboxes, the busiest
	for i := range s1 {
		pct := 100 * float64(s1[i]-s0[i]) / 1e9 / secs
		sbx, sbxMax = sbx+pct, max(sbxMax, pct)
	}
	line := fmt.Sprintf("load %s  host CPU %5.1f%% (%.3f%% each)  sandbox CPU %.3f%% of a core each (max %.3f%%)  ptd CPU %.1f%% (its runtime calls %.1f%%)  "+
		"host memory %d MB (%.1f MB each), cgroups %.1f MB each  ptd RSS %d MB (%.0f KB each), %d goroutines (%.1f each)  "+
		"GET p50 %s p99 %s %.0f/s  (healthz p50 %s p99 %s %.0f/s; GET p99 %.2fx)",
		strings.Join(strings.Fields(string(load))[:3], " "), host, host/n, sbx/n, sbxMax, ptd, kids,
		(mem-b.mem)>>20, float64(mem-b.mem)/n/(1<<20), float64(cgMem)/n/(1<<20),
		rss>>20, float64(rss-b.rss)/n/1024, gor, float64(gor-b.goroutines)/n,
		benchkit.MS(gp[0]), benchkit.MS(gp[2]), float64(len(get))/cfg.round.Seconds(),
		benchkit.MS(hp[0]), benchkit.MS(hp[2]), float64(len(health))/cfg.round.Seconds(), float64(gp[2])/float64(hp[2]))
	if len(execs) > 0 {
		ep := benchkit.Percentiles(execs)
		line += fmt.Sprintf("  exec p50 %s p99 %s", benchkit.MS(ep[0]), benchkit.MS(ep[2]))
	}
	return line, nil
}

// sandboxesUsage reads the CPU (ns) of each sandbox's own host cgroup
// under the daemon's cgroup parent, and the memory (bytes) of them all.
func sandboxesUsage(d *ptdtest.Daemon, ids []string) (cpu []int64, mem int64, err error) {
	dirs, err := sandboxCgroups(d.Cgroup)
	if err != nil {
		return nil, 0, err
	}
	for _, id := range ids {
		dir, ok := dirs[id]
		if !ok {
			return nil, 0, fmt.Errorf("no cgroup for sandbox %s under %s", id, d.Cgroup)
		}
		c, m, err := cgroupUsage(dir)
		if err != nil {
			return nil, 0, err
		}
		cpu, mem = append(cpu, c), mem+m
	}
	return cpu, mem, nil
}

// startBusy starts a shell spinning forever in every sandbox and returns
// each one's sandbox and pid, for stopBusy.
func startBusy(c *benchkit.Client, ids []string) ([][2]string, error) {
	var out [][2]string
	for _, id := range ids {
		st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/processes", map[string]any{"cmd": "while :; do :; done"})
		if err != nil || st != 201 {
			return out, fmt.Errorf("busy loop: %d %s %v", st, b, err)
		}
		var p struct{ PID json.Number }
		json.Unmarshal(b, &p)
		out = append(out, [2]string{id, p.PID.String()})
	}
	return out, nil
}

// stopBusy ends the busy loops, a few at a time, retrying each a while:
// the agent of a sandbox its own loop starves can time out.
func stopBusy(c *benchkit.Client, pids [][2]string) {
	eightAtOnce(pids, func(p [2]string) {
		for try := range 10 {
			st, b, err := c.Do("DELETE", "/v1/sandboxes/"+p[0]+"/processes/"+p[1], nil)
			if err == nil && (st == 204 || st == 404) {
				return
			}
			if try == 9 {
				fmt.Fprintf(os.Stderr, "bench/density: busy loop %s in %s still runs: %d %s %v\n", p[1], p[0], st, b, err)
			}
			time.Sleep(time.Second)
		}
	})
}

// ticks are the host's CPU jiffies, all cores: total and not idle.
type ticks struct{ total, busy int64 }

// cpuTicks reads the host's jiffies from /proc/stat and ptd's from
// /proc/PID/stat: its own (utime+stime) and its waited-for children's
// (cutime+cstime: the runc and runsc calls it makes); all count USER_HZ.
func cpuTicks(pid int) (ticks, [2]int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return ticks{}, [2]int64{}, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	var t ticks
	for i, f := range strings.Fields(string(line))[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		if i >= 8 { // guest time is already in user
			break
		}
		t.total += v
		if i != 3 && i != 4 { // idle, iowait
			t.busy += v
		}
	}
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return t, [2]int64{}, err
	}
	_, rest, _ := bytes.Cut(b, []byte(") ")) // after the command name
	f := strings.Fields(string(rest))
	if len(f) < 15 {
		return t, [2]int64{}, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	var v [4]int64
	for i := range v {
		v[i], _ = strconv.ParseInt(f[11+i], 10, 64)
	}
	return t, [2]int64{v[0] + v[1], v[2] + v[3]}, nil
}

// hostMemUsed is MemTotal - MemAvailable, in bytes.
func hostMemUsed() (int64, error) {
	m, err := meminfo("/proc/meminfo", "MemTotal:", "MemAvailable:")
	return m[0] - m[1], err
}

func procRSS(pid int) (int64, error) {
	m, err := meminfo(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
	return m[0], err
}

// meminfo reads the kB fields named keys from a /proc file, in bytes.
func meminfo(path string, keys ...string) ([]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make([]int64, len(keys))
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		for i, k := range keys {
			if len(fs) >= 2 && fs[0] == k {
				v, _ := strconv.ParseInt(fs[1], 10, 64)
				out[i] = v << 10
				found++
			}
		}
	}
	if found != len(keys) {
		return out, fmt.Errorf("%s: want %v", path, keys)
	}
	return out, sc.Err()
}

// goroutines reads go_goroutines from ptd's metrics listener.
func goroutines(metricsURL string) (int, error) {
	resp, err := http.Get(metricsURL + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no go_goroutines in %s/metrics", metricsURL)
}
