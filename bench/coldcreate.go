package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/host"
	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/runtime/oci"
)

var onlyColdCreate = flag.Bool("only-cold-create", false,
	"measure only cold create → first exec per class beside the raw runtime's run -d + first exec, interleaved, with ptd's create steps (coldcreate.go)")

// coldCreateBench times, per runtime class, create → first exec through
// the API (cold: no pool serves plain creates) beside the same class's raw
// runtime doing the same work on a busybox bundle made by ptd's own config
// code: `run -d` of a sleeping init, then `exec true`, unpinned and
// pinned to one core as the host pins a 1-CPU sandbox (its cpuset is the
// CPU count the guest sees). The raw runs and one API create alternate,
// so all see the same load on a shared host. The raw gVisor run has no
// network namespace (--network=none); ptd's sandbox has one.
// log returns ptd's log so far: its debug lines give each create's steps.
func coldCreateBench(c *benchkit.Client, n int, log func() string, ptd cpuSource) (err error) {
	defer func() {
		if *ptdLogOut != "" {
			os.WriteFile(*ptdLogOut, []byte(log()), 0o644)
		}
		if err != nil { // what ptd said last, for the failure
			l := strings.Split(strings.TrimSpace(log()), "\n")
			fmt.Println(strings.Join(l[max(0, len(l)-25):], "\n"))
		}
	}()
	if err := c.EnsureTemplate("busybox"); err != nil {
		return err
	}
	var classes []string
	for _, class := range strings.Split(*coldClasses, ",") {
		if _, err := exec.LookPath(map[string]string{"gvisor": "runsc"}[class]); class == "gvisor" && err != nil {
			continue // not installed here
		}
		classes = append(classes, class)
	}
	for _, class := range classes {
		raw, err := newRawBaseline(class)
		if err != nil {
			return fmt.Errorf("%s baseline: %w", class, err)
		}
		var create, firstExec, secondExec, total []time.Duration
		before := len(log())
		for i := range n {
			if err := errors.Join(raw.once(i, ""), raw.once(i, "0")); err != nil {
				raw.close()
				return fmt.Errorf("%s baseline: %w", class, err)
			}
			t0 := time.Now()
			id, err := createClass(c, class, 512)
			if err != nil {
				raw.close()
				return err
			}
			t1 := time.Now()
			if _, err := c.Exec(id, []string{"true"}); err != nil {
				raw.close()
				return err
			}
			create, firstExec, total = append(create, t1.Sub(t0)), append(firstExec, time.Since(t1)), append(total, time.Since(t0))
			t2 := time.Now()
			if _, err := c.Exec(id, []string{"true"}); err != nil {
				raw.close()
				return err
			}
			secondExec = append(secondExec, time.Since(t2))
			if err := c.Delete(id); err != nil {
				raw.close()
				return err
			}
			c.WaitGone(id)
		}
		raw.close()
		bin := raw.binary
		fmt.Printf("\n%s, cold, %d runs interleaved with the raw runtime:\n", class, n)
		benchkit.Report("raw "+bin+" run -d", raw.run, nil)
		benchkit.Report("raw "+bin+" exec true (first)", raw.exec, nil)
		benchkit.Report("raw "+bin+" run -d + first exec", sum(raw.run, raw.exec), nil)
		benchkit.Report("raw, pinned to one core: run -d", raw.pinnedRun, raw.run)
		benchkit.Report("raw, pinned to one core: exec true", raw.pinnedExec, raw.exec)
		benchkit.Report("raw, pinned to one core: run -d + exec", sum(raw.pinnedRun, raw.pinnedExec), sum(raw.run, raw.exec))
		fmt.Println("ratios below: against raw unpinned, then raw pinned (a 1-CPU sandbox is pinned)")
		benchkit.Report("create → first exec ("+class+"), vs raw", total, sum(raw.run, raw.exec))
		benchkit.Report("create → first exec ("+class+"), vs raw pinned", total, sum(raw.pinnedRun, raw.pinnedExec))
		benchkit.Report("  create API call (until running)", create, raw.pinnedRun)
		benchkit.Report("  first exec API call", firstExec, raw.pinnedExec)
		benchkit.Report("  second exec API call (not timed above)", secondExec, raw.pinnedExec)
		reportCreateSteps(log()[before:])
		fmt.Printf("%-42s %.2fx (p50 against raw pinned; target ≤ 1.3x)\n", "create → first exec ("+class+") / raw", benchkit.Ratio(total, sum(raw.pinnedRun, raw.pinnedExec)))
	}
	if *burst > 0 {
		for _, class := range classes {
			if err := burstBench(c, class, *burst, log, ptd); err != nil {
				return fmt.Errorf("%s burst: %w", class, err)
			}
		}
	}
	return nil
}

// rawBaseline is one runtime class's raw run + first exec on a busybox
// bundle written by ptd's own OCI config code.
type rawBaseline struct {
	*busyboxRuntime
	binary    string
	run, exec []time.Duration
	// pinnedRun and pinnedExec are the same on one core, as the host
	// pins a 1-CPU sandbox (its cpuset is what the guest counts).
	pinnedRun, pinnedExec []time.Duration
}

func newRawBaseline(class string) (*rawBaseline, error) {
	b := &rawBaseline{}
	r, err := newBusyboxRuntime(class, func(state string) oci.Config {
		cfg := oci.DefaultConfig()
		if class == "gvisor" {
			cfg = oci.GVisorConfig(state)
		}
		cfg.Root = state
		b.binary = cfg.Binary
		return cfg
	})
	if err != nil {
		return nil, err
	}
	b.busyboxRuntime = r
	if *rawCPUWeight > 0 {
		// ptd's sandboxes share one cgroup parent of this weight: on a busy
		// host the raw runs get the same share of the CPU, not more.
		if err := oci.SetParentCPUWeight(r.cg, *rawCPUWeight); err != nil {
			r.close()
			return nil, err
		}
	}
	return b, nil
}

var rawCPUWeight = flag.Int("raw-cpu-weight", host.DefaultConfig("").SandboxCPUWeight,
	"with -only-cold-create: the CPU weight of the raw runs' cgroup parent, as ptd's --sandbox-cpu-weight sets its sandboxes' (0 leaves the default)")

// sum is run + exec of each run.
func sum(run, exec []time.Duration) []time.Duration {
	out := make([]time.Duration, len(run))
	for i := range run {
		out[i] = run[i] + exec[i]
	}
	return out
}

// once runs a container detached with the runtime binary alone (ptd's
// global flags and config.json, stdio on /dev/null, but nothing ptd's
// runtime wrapper does around it: oci.RunCommand), runs `true` in it
// with the plain binary, and deletes it. cpus pins it as
// the host pins a sandbox of that many CPUs ("" leaves it unpinned).
func (b *rawBaseline) once(i int, cpus string) error {
	id := fmt.Sprintf("bench-%d-%d", i, len(cpus))
	bundle := filepath.Join(b.dir, id)
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(bundle)
	spec := runtime.Spec{ID: id, BundleDir: bundle, RootFS: b.rootfs, Hostname: id, CgroupPath: b.cg + "/" + id,
		Resources: runtime.Resources{CPU: 1, MemoryBytes: 512 << 20, Pids: 1024, CPUs: cpus},
		Args:      []string{"/bin/sleep", "1000"}}
	cmd, err := b.rt.RunCommand(context.Background(), spec)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(filepath.Join(bundle, "runc.log"))
		return fmt.Errorf("%s run: %w: %s", b.binary, err, log)
	}
	run := time.Since(t0)
	t1 := time.Now()
	if out, err := exec.Command(b.binary, "--root", b.state, "exec", id, "/bin/true").CombinedOutput(); err != nil {
		return fmt.Errorf("%s exec: %v: %s", b.binary, err, out)
	}
	if cpus == "" {
		b.run, b.exec = append(b.run, run), append(b.exec, time.Since(t1))
	} else {
		b.pinnedRun, b.pinnedExec = append(b.pinnedRun, run), append(b.pinnedExec, time.Since(t1))
	}
	return b.rt.Delete(context.Background(), id)
}

// coldRuns puts the cold create section into a whole run (and so into
// -report's bench/REPORT.md), after the other sections.
var coldRuns = flag.Int("cold-runs", 0, "also run -only-cold-create's section (with -cold-classes and -burst) after the main bench, this many runs per class (0 skips); ptd's create steps are printed only with -ptd-log-level debug")

var ptdLogOut = flag.String("ptd-log-out", "", "with -only-cold-create: write ptd's whole (debug) log to this file at the end, for a create's steps by time")

var coldClasses = flag.String("cold-classes", "runc,gvisor", "with -only-cold-create: the runtime classes (gvisor where runsc is installed)")

var burst = flag.Int("burst", 20, "with -only-cold-create: creates sent at once per class, beside as many raw runs started at once (0 skips)")

// burstWaitMS is the wait_timeout_ms each burst create sends; an answer
// later than it breaks the API's promise.
const burstWaitMS = 120000

var burstRounds = flag.Int("burst-rounds", 1, "with -burst: ptd bursts per class, each between two raw bursts (raw, ptd, raw, ptd, raw…), so a shared host's moving load shows in each ratio; the median is printed")

// burstBench starts n raw `run -d` + first exec of class at once (each
// pinned to one core, spread over the cores as the host spreads 1-CPU
// sandboxes) and, after they are gone, sends n creates
// (?wait_for_state=running) each followed by its first exec at once, then
// n raw runs again; with -burst-rounds, more ptd and raw bursts alternate.
// It prints every wall time, each ptd burst's ratio to the mean of the raw
// bursts on either side (and their median), the creates' latencies, their
// answers by code, and how many answered after their wait_timeout_ms.
func burstBench(c *benchkit.Client, class string, n int, log func() string, ptd cpuSource) error {
	raw, err := newRawBaseline(class)
	if err != nil {
		return err
	}
	defer raw.close()
	var wg sync.WaitGroup
	errs := make([]error, n)
	var mu sync.Mutex
	// rawBurst is n raw runs at once; it runs before and after each of the
	// API's bursts, so that a host whose load moves meanwhile shows in both.
	rawSrc := cpuSource{Cgroup: raw.cg} // Pid 0: the bench's own reaped children, the runsc commands
	var rawCPU, apiCPU, ptdOwnCPU time.Duration
	rawBurst := func(round int) (time.Duration, error) {
		c0 := rawSrc.cpu()
		defer func() { rawCPU += rawSrc.cpu() - c0 }()
		t0 := time.Now()
		for i := range n {
			wg.Go(func() {
				errs[i] = raw.onceLocked(&mu, 1000+round*n+i, strconv.Itoa(i%goruntime.NumCPU()))
			})
		}
		wg.Wait()
		return time.Since(t0), errors.Join(errs...)
	}
	rawWalls := make([]time.Duration, 1, *burstRounds+1)
	if rawWalls[0], err = rawBurst(0); err != nil {
		return fmt.Errorf("raw burst: %w", err)
	}
	before := len(log())
	var lat, answered []time.Duration
	var apiWalls []time.Duration
	var loads []string
	byCode := map[int]int{}
	late := 0
	var apiErrs []error
	for round := range max(1, *burstRounds) {
		o0, c0 := ptd.cpuParts()
		l, a, codes, wall, err := apiBurst(c, class, n)
		time.Sleep(time.Second) // the deleted sandboxes' processes reaped
		o1, c1 := ptd.cpuParts()
		apiCPU, ptdOwnCPU = apiCPU+o1-o0+c1-c0, ptdOwnCPU+o1-o0
		apiWalls, loads = append(apiWalls, wall), append(loads, loadAvg())
		lat, answered, apiErrs = append(lat, l...), append(answered, a...), append(apiErrs, err)
		for i, st := range codes {
			byCode[st]++
			if a[i] > burstWaitMS*time.Millisecond+time.Second {
				late++
			}
		}
		w, err := rawBurst(round + 1)
		if err != nil {
			return fmt.Errorf("raw burst after: %w", err)
		}
		rawWalls = append(rawWalls, w)
	}
	fmt.Printf("\n%s, %d at once (raw pinned across %d cores), raw before and after each of ptd's:\n", class, n, goruntime.NumCPU())
	var ratios []float64
	for i, apiWall := range apiWalls {
		mean := (rawWalls[i] + rawWalls[i+1]) / 2
		ratios = append(ratios, float64(apiWall)/float64(mean))
		fmt.Printf("%-42s %9s\n", "raw run -d + first exec, wall", benchkit.MS(rawWalls[i]))
		fmt.Printf("%-42s %9s   %.2fx the raw walls' mean; load average at its end %s\n", "create → first exec through ptd, wall", benchkit.MS(apiWall), ratios[i], loads[i])
	}
	fmt.Printf("%-42s %9s\n", "raw run -d + first exec, wall", benchkit.MS(rawWalls[len(rawWalls)-1]))
	slices.Sort(ratios)
	median := (ratios[(len(ratios)-1)/2] + ratios[len(ratios)/2]) / 2
	fmt.Printf("%-42s %.2fx (median of %d; target ≤ 1.5x)\n", "ptd wall / mean raw wall", median, len(ratios))
	// CPU time is the burst's work whatever share of a shared host it got:
	// its ratio moves far less with other load than the walls do.
	rounds := max(1, *burstRounds)
	fmt.Printf("%-42s %9s per run (raw: runsc commands and their sandboxes)\n", "CPU time, raw", benchkit.MS(rawCPU/time.Duration((rounds+1)*n)))
	fmt.Printf("%-42s %9s per create (ptd and its children, sandboxes, deletes)   %.2fx raw\n", "CPU time, ptd", benchkit.MS(apiCPU/time.Duration(rounds*n)),
		float64(apiCPU)/float64(rounds*n)/(float64(rawCPU)/float64((rounds+1)*n)))
	fmt.Printf("%-42s %9s per create (its own Go code and the kernel work it asks for)\n", "  of which ptd itself", benchkit.MS(ptdOwnCPU/time.Duration(rounds*n)))
	benchkit.Report("  each create → first exec", lat, raw.pinnedRun)
	benchkit.Report("  each create API answer", answered, nil)
	fmt.Printf("  answers by code %v; answered after wait_timeout_ms: %d; errors: %v\n", byCode, late, errors.Join(apiErrs...))
	// A boot whose agent was slower than the host's first wait is torn
	// down and booted again: each is a whole boot more on a loaded host.
	fmt.Printf("  boots torn down and started again (agent slower than the first wait): %d\n",
		strings.Count(log()[before:], "agent unreachable; rebuilding"))
	reportCreateSteps(log()[before:])
	fmt.Printf("  boot slots (adaptive bound): highest %d, halvings %d\n", highestBootSlots(log()[before:]), strings.Count(log()[before:], "slow=true"))
	return nil
}

// highestBootSlots is the highest bound ptd's "boot slots" debug lines
// name in log (0: none changed it).
func highestBootSlots(log string) int {
	most := 0
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `msg="boot slots"`) {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "to="); ok {
				if n, err := strconv.Atoi(v); err == nil {
					most = max(most, n)
				}
			}
		}
	}
	return most
}

// apiBurst sends n creates of class at once, each followed by its first
// exec, and deletes them all once they have answered. It returns each
// create → first exec, each create's answer time and code, and the wall.
func apiBurst(c *benchkit.Client, class string, n int) (lat, answered []time.Duration, codes []int, wall time.Duration, err error) {
	lat, answered = make([]time.Duration, n), make([]time.Duration, n)
	codes = make([]int, n)
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	t1 := time.Now()
	for i := range n {
		wg.Go(func() {
			s := time.Now()
			st, b, err := c.Do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms="+strconv.Itoa(burstWaitMS), map[string]any{
				"template": "busybox", "runtime": class, "cpu": 1, "ram_mb": 512, "disk_gb": 1})
			codes[i], answered[i] = st, time.Since(s)
			var m struct{ ID string }
			json.Unmarshal(b, &m)
			ids[i] = m.ID
			if err != nil {
				errs[i] = err
				return
			}
			if st == 201 {
				if _, err := c.Exec(m.ID, []string{"true"}); err != nil {
					errs[i] = err
				}
			}
			lat[i] = time.Since(s)
		})
	}
	wg.Wait()
	wall = time.Since(t1)
	for _, id := range ids {
		if id != "" {
			c.Delete(id)
		}
	}
	for _, id := range ids {
		if id != "" {
			c.WaitGone(id)
		}
	}
	return lat, answered, codes, wall, errors.Join(errs...)
}

// cpuSource names processes whose CPU time a burst adds up: Pid's own
// (none when 0) and its reaped children's (this process's when 0), and
// Cgroup's (when set), which holds the sandboxes. ptd is a child
// subreaper: a sandbox's processes end as its children, so its reaped
// children's time holds them, and its cgroup is not added again; the raw
// runs' sandboxes end as init's children and are counted by their cgroup.
type cpuSource struct {
	Pid    int
	Cgroup string
}

// cpu is the CPU time src's processes have used so far (cgroup v1's
// cpuacct or v2's cpu.stat; 0 for what cannot be read).
func (src cpuSource) cpu() time.Duration {
	own, rest := src.cpuParts()
	return own + rest
}

// cpuParts is cpu split into Pid's own time and the rest (its reaped
// children's, the cgroup's).
func (src cpuSource) cpuParts() (own, rest time.Duration) {
	var total time.Duration
	pid, self := src.Pid, false
	if pid == 0 {
		pid, self = os.Getpid(), true
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if _, rest, ok := strings.Cut(string(b), ") "); ok {
			f := strings.Fields(rest) // f[11..14]: utime stime cutime cstime
			for i := 11; i <= 14 && len(f) > 14; i++ {
				if self && i < 13 {
					continue
				}
				t, _ := strconv.ParseInt(f[i], 10, 64)
				if i < 13 {
					own += time.Duration(t) * 10 * time.Millisecond // USER_HZ 100
				} else {
					total += time.Duration(t) * 10 * time.Millisecond
				}
			}
		}
	}
	if src.Cgroup == "" {
		return own, total
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/cpuacct" + src.Cgroup + "/cpuacct.usage"); err == nil {
		ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		total += time.Duration(ns)
	} else if b, err := os.ReadFile("/sys/fs/cgroup" + src.Cgroup + "/cpu.stat"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, _ := strconv.ParseInt(v, 10, 64)
				total += time.Duration(us) * time.Microsecond
			}
		}
	}
	return own, total
}

// onceLocked is once for concurrent callers: the runs themselves overlap,
// only the recording is serialised.
func (b *rawBaseline) onceLocked(mu *sync.Mutex, i int, cpus string) error {
	nb := &rawBaseline{busyboxRuntime: b.busyboxRuntime, binary: b.binary}
	if err := nb.once(i, cpus); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	b.pinnedRun = append(b.pinnedRun, sum(nb.pinnedRun, nb.pinnedExec)...)
	return nil
}

// loadAvg is /proc/loadavg's three load averages ("" where unreadable).
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
