// Command bench measures Platinum against raw runc in the same run and
// prints p50/p95/p99 and ratios. It starts its own ptd (like the e2e
// tests), so it needs root and the packages scripts/setup.sh installs.
//
//	go run ./bench [-n 50] [-templates busybox,pt-base] [-report]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/runtime"
	"github.com/platinum-dev/platinum/internal/runtime/oci"
	"github.com/platinum-dev/platinum/internal/template"
)

func main() {
	flag.Parse()
	var rec *recorder
	if *report {
		var err error
		if rec, err = startRecording(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: report:", err)
			os.Exit(1)
		}
	}
	err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
	if rec != nil {
		if rerr := rec.finish(reportPath, err); rerr != nil {
			fmt.Fprintln(os.Stderr, "bench: report:", rerr)
			os.Exit(1)
		}
		fmt.Println("bench: wrote", reportPath)
	}
	if err != nil {
		os.Exit(1)
	}
}

// The flags of run live at package level: main parses them all before
// run, to know -report.
var (
	n             = flag.Int("n", 50, "runs per measurement")
	tpls          = flag.String("templates", "busybox,pt-base", "templates to measure create→first exec on")
	archiveRuns   = flag.Int("archive-runs", 3, "runs of the archive throughput bench (0 skips it)")
	runtimes      = flag.Bool("runtimes", true, "measure runc and gvisor side by side (create, stop/start with 256 MB of memory)")
	onlyRuntimes  = flag.Bool("only-runtimes", false, "measure only the runtime classes (gvisor.go)")
	previewRuns   = flag.Bool("preview", true, "measure the preview proxy against direct access (preview.go)")
	onlyPreview   = flag.Bool("only-preview", false, "measure only the preview proxy (preview.go)")
	onlyEgress    = flag.Bool("only-egress", false, "measure only the egress proxy against direct HTTPS (egress.go)")
	onlyCreate    = flag.Bool("only-create", false, "measure only create → first exec and API exec against raw runc")
	logLevel      = flag.String("ptd-log-level", "info", "ptd's --log-level; debug prints where each create's time went")
	ptdArgs       = flag.String("ptd-args", "", "more flags for the bench's ptd, space-separated (e.g. \"--boot-slots 8\"), to compare its settings in one session")
	onlyCode      = flag.Bool("only-code", false, "measure only the code API: create → first runCode, the kernel's start, the steady-state round trip (code.go)")
	codeFirst     = flag.Int("code-first-runs", 0, "with -only-code: create → first runCode runs per runtime class (default: -n)")
	codeRuntimes  = flag.String("code-runtimes", "runc,gvisor", "with -only-code: the runtime classes to measure the native API on")
	codeTemplate  = flag.Bool("code-template-build", false, "measure only a cold build of the code-interpreter template into an empty cache (codetemplate.go)")
	templateCache = flag.String("template-cache", "", "with -code-template-build: the empty cache dir to build into (default: a temp dir, removed after)")
	onlyArchive   = flag.Bool("only-archive", false, "measure only archive/unarchive throughput against plain zstd (archive.go)")
)

func run() error {
	if *tplOnly {
		return templatesBench(*tplRuns)
	}
	if *onlyArchive {
		return archiveBench(max(*archiveRuns, 1))
	}
	if *codeTemplate {
		root, err := filepath.Abs(".")
		if err != nil {
			return err
		}
		return codeTemplateBench(root, *templateCache)
	}
	if *onlyColdCreate {
		// ptd's debug log gives each create's steps.
		*archiveRuns, *logLevel = 0, "debug"
	}
	if *onlyEgress {
		return egressBench(*n)
	}
	if *onlyCreate || *onlyCode {
		*archiveRuns, *runtimes, *previewRuns = 0, false, false
	}
	if *mcpOnly {
		*archiveRuns = 0 // nothing but the MCP bench runs
	}
	if *onlyPreview || *onlyRuntimes || *onlyCreate {
		// The other sections run from defers below: skip them.
		*snapRuns, *idemRuns, *eventRuns, *sessionRuns, *mcpRuns = 0, 0, 0, 0, 0
	}
	if *archiveRuns > 0 && !*onlyRuntimes && !*onlyPreview && !*snapOnly {
		defer section("archive", func() error { return archiveBench(*archiveRuns) })
	}
	d, c, err := benchkit.StartPtd(append([]string{"--webhook-allow-private", "--log-level", *logLevel}, strings.Fields(*ptdArgs)...)...)
	defer d.Stop()
	if err != nil {
		return err
	}
	if *onlyColdCreate {
		fmt.Printf("Platinum cold create bench: %d runs per class, %s\n", *n, time.Now().UTC().Format(time.RFC3339))
		return coldCreateBench(c, *n, d.Log, cpuSource{Pid: d.PID()})
	}
	if *mcpOnly {
		return mcpBench(c, d, *mcpRuns)
	}
	if *onlyCode {
		fmt.Printf("Platinum code bench: %d runs, %s\n\n", *n, time.Now().UTC().Format(time.RFC3339))
		first := *codeFirst
		if first <= 0 {
			first = *n
		}
		return codeBench(c, *n, first, strings.Split(*codeRuntimes, ","))
	}
	// Each of these runs alone with its -only flag, else after the main
	// bench (deferred, so in reverse order: mcp first) when it has runs.
	for _, s := range []struct {
		name  string
		only  bool
		runs  int
		bench func() error
	}{
		{"snapshots", *snapOnly, *snapRuns, func() error { return snapshotBench(c, *snapRuns, d.DataDir) }},
		{"idempotency", *idemOnly, *idemRuns, func() error { return idemBench(c, *idemRuns) }},
		{"events", *eventsOnly, *eventRuns, func() error { return eventsBench(c, *eventRuns) }},
		{"sessions", *sessionsOnly, *sessionRuns, func() error { return sessionsBench(c, *sessionRuns) }},
		{"mcp", false, *mcpRuns, func() error { return mcpBench(c, d, *mcpRuns) }},
		{"cold create", false, *coldRuns, func() error { return coldCreateBench(c, *coldRuns, d.Log, cpuSource{Pid: d.PID()}) }},
	} {
		if s.only {
			return s.bench()
		}
		if s.runs > 0 {
			defer section(s.name, s.bench)
		}
	}
	fmt.Printf("Platinum bench: %d runs each, %s\n\n", *n, time.Now().UTC().Format(time.RFC3339))
	if *onlyPreview {
		return previewBench(c, d, *n)
	}
	if *previewRuns {
		section("preview", func() error { return previewBench(c, d, *n) })
	}
	if *onlyRuntimes {
		return runtimeBench(c, *n, d.DataDir)
	}
	if *runtimes {
		section("runtime classes", func() error { return runtimeBench(c, *n, d.DataDir) })
	}

	// The raw runc baseline runs interleaved with ptd's creates, one of
	// each in turn, so both see the same load on a shared machine.
	base, err := newRuncBaseline()
	if err != nil {
		return fmt.Errorf("runc baseline: %w", err)
	}
	defer base.close()
	type createRuns struct {
		tpl         string
		create, del []time.Duration
	}
	var runs []*createRuns
	for _, tpl := range strings.Split(*tpls, ",") {
		if err := c.EnsureTemplate(tpl); err != nil {
			return err
		}
		runs = append(runs, &createRuns{tpl: tpl})
	}
	for i := 0; i < *n; i++ {
		for _, r := range runs {
			if err := base.once(); err != nil {
				return fmt.Errorf("runc baseline: %w", err)
			}
			t0 := time.Now()
			id, err := c.Create(r.tpl)
			if err != nil {
				return err
			}
			if _, err := c.Exec(id, []string{"true"}); err != nil {
				return err
			}
			r.create = append(r.create, time.Since(t0))
			t1 := time.Now()
			if err := c.Delete(id); err != nil {
				return err
			}
			r.del = append(r.del, time.Since(t1))
			c.WaitGone(id)
		}
	}
	benchkit.Report("raw runc run -d (busybox bundle)", base.run, nil)
	benchkit.Report("raw runc exec true", base.exec, nil)
	for _, r := range runs {
		benchkit.Report("create → first exec ("+r.tpl+")", r.create, base.run)
		benchkit.Report("delete API call ("+r.tpl+")", r.del, nil)
	}
	if *logLevel == "debug" {
		reportCreateSteps(d.Log())
	}

	id, err := c.Create("busybox")
	if err != nil {
		return err
	}
	var execs []time.Duration
	for i := 0; i < *n*4; i++ {
		t0 := time.Now()
		if _, err := c.Exec(id, []string{"true"}); err != nil {
			return err
		}
		execs = append(execs, time.Since(t0))
	}
	benchkit.Report("API exec round trip of true", execs, base.exec)
	if *onlyCreate {
		return c.Delete(id)
	}

	// stop → start: warm (frozen in RAM, processes intact) and disk-only
	// (cold boot from the same disk), each timed from the start call to
	// the first exec answering.
	for _, mode := range []struct{ name, query, restore string }{
		{"warm", "", "memory"}, {"disk_only", "&memory=false", "disk_only"},
	} {
		var starts []time.Duration
		for i := 0; i < *n; i++ {
			if st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/stop?wait_for_state=stopped"+mode.query, nil); err != nil || st != 200 {
				return fmt.Errorf("stop: %d %s %v", st, b, err)
			}
			t0 := time.Now()
			st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/start?wait_for_state=running", nil)
			if err != nil || st != 200 || !bytes.Contains(b, []byte(`"restore":"`+mode.restore+`"`)) {
				return fmt.Errorf("start: %d %s %v", st, b, err)
			}
			if _, err := c.Exec(id, []string{"true"}); err != nil {
				return err
			}
			starts = append(starts, time.Since(t0))
		}
		benchkit.Report("stop → start → first exec ("+mode.name+")", starts, base.run)
	}
	// Live resize (cpu/ram within the boot's headroom) and online disk
	// grow, timed until the guest's df shows the new size.
	var resizes, grows []time.Duration
	for i := 0; i < *n; i++ {
		body := map[string]any{"cpu": 1 + float64(i%2), "ram_mb": 512 + 256*(i%2)}
		t0 := time.Now()
		if st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/resize", body); err != nil || st != 200 {
			return fmt.Errorf("resize: %d %s %v", st, b, err)
		}
		resizes = append(resizes, time.Since(t0))
	}
	for i := 0; i < min(*n, 20); i++ {
		gb := 2 + i
		t0 := time.Now()
		if st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/resize", map[string]any{"disk_gb": gb}); err != nil || st != 200 {
			return fmt.Errorf("disk grow: %d %s %v", st, b, err)
		}
		for {
			out, err := c.Exec(id, []string{"sh", "-c", "df -k / | tail -1"})
			if err != nil {
				return err
			}
			var res struct{ Stdout string }
			json.Unmarshal([]byte(out), &res)
			if f := strings.Fields(res.Stdout); len(f) > 1 {
				if kb, _ := strconv.ParseInt(f[1], 10, 64); kb > int64(gb-1)<<20 {
					break
				}
			}
		}
		grows = append(grows, time.Since(t0))
	}
	benchkit.Report("live resize cpu/ram (API answer, target p50 ≤ 50 ms)", resizes, base.update)
	benchkit.Report("disk grow until the guest's df shows it (target ≤ 1 s)", grows, nil)
	return c.Delete(id)
}

// section runs one section of the bench and reports its failure without
// failing the run: one section failing (a loaded host) does not cost the
// others.
func section(name string, bench func() error) {
	if err := bench(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: "+name+":", err)
	}
}

// runcBaseline times `runc run -d` and `runc exec true` on a bundle made
// by the same config generator ptd uses, over a plain busybox rootfs.
type runcBaseline struct {
	*busyboxRuntime
	run, exec []time.Duration
	// update is a live resize of the running container through the same
	// runtime code ptd uses (runc update), the baseline of ptd's resize.
	update []time.Duration
}

func newRuncBaseline() (*runcBaseline, error) {
	r, err := newBusyboxRuntime("runc", func(state string) oci.Config { return oci.Config{Root: state} })
	if err != nil {
		return nil, err
	}
	return &runcBaseline{busyboxRuntime: r}, nil
}

// busyboxRuntime is what a raw baseline runs its containers with: a plain
// busybox rootfs, the OCI runtime code ptd uses with its state in a temp
// dir, and a cgroup of its own.
type busyboxRuntime struct {
	dir, rootfs, state, cg string
	rt                     *oci.Runtime
}

// newBusyboxRuntime makes one whose runtime config is cfg(its state dir).
func newBusyboxRuntime(class string, cfg func(state string) oci.Config) (*busyboxRuntime, error) {
	dir, err := os.MkdirTemp("/var/tmp", "pt-bench-"+class+"-")
	if err != nil {
		return nil, err
	}
	b := &busyboxRuntime{dir: dir, rootfs: filepath.Join(dir, "rootfs"), state: filepath.Join(dir, "state"),
		cg: "/platinum-bench-" + ptdtest.RandHex(3)}
	if err := template.BuildBusybox(context.Background(), b.rootfs); err != nil {
		b.close()
		return nil, err
	}
	if b.rt, err = oci.New(cfg(b.state), nil); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *busyboxRuntime) close() {
	ptdtest.RemoveCgroup(b.cg)
	os.RemoveAll(b.dir)
}

// once runs, execs in and deletes one container.
func (b *runcBaseline) once() error {
	id := fmt.Sprintf("bench-%d", len(b.run))
	bundle := filepath.Join(b.dir, id)
	os.MkdirAll(bundle, 0o700)
	spec := runtime.Spec{ID: id, BundleDir: bundle, RootFS: b.rootfs, Hostname: id, CgroupPath: b.cg + "/" + id,
		Resources: runtime.Resources{CPU: 1, MemoryBytes: 512 << 20, Pids: 1024},
		Args:      []string{"/bin/sleep", "1000"}}
	if err := b.rt.WriteConfig(spec); err != nil {
		return err
	}
	// Stdio stays on /dev/null: the detached container would inherit
	// pipes and hold them open forever.
	t0 := time.Now()
	logFile := filepath.Join(bundle, "runc.log")
	if err := exec.Command("runc", "--root", b.state, "--log", logFile, "run", "-d", "--bundle", bundle, id).Run(); err != nil {
		out, _ := os.ReadFile(logFile)
		return fmt.Errorf("runc run: %v: %s", err, out)
	}
	b.run = append(b.run, time.Since(t0))
	t1 := time.Now()
	if out, err := exec.Command("runc", "--root", b.state, "exec", id, "/bin/true").CombinedOutput(); err != nil {
		return fmt.Errorf("runc exec: %v: %s", err, out)
	}
	b.exec = append(b.exec, time.Since(t1))
	t2 := time.Now()
	if err := b.rt.Update(context.Background(), id, runtime.Resources{CPU: 2, MemoryBytes: 768 << 20, Pids: 1024, CPUs: "0"}); err != nil {
		return fmt.Errorf("runc update: %w", err)
	}
	b.update = append(b.update, time.Since(t2))
	return b.rt.Delete(context.Background(), id)
}

// reportCreateSteps prints p50s of where ptd's creates spent their time,
// from its debug log's "sandbox started" (host) and "sandbox provisioned"
// (control plane) lines.
func reportCreateSteps(log string) {
	steps := map[string][]time.Duration{}
	var order []string
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "sandbox started") && !strings.Contains(line, "sandbox provisioned") && !strings.Contains(line, `msg="container run"`) {
			continue
		}
		for _, f := range strings.Fields(line) {
			k, v, ok := strings.Cut(f, "=")
			if dur, err := time.ParseDuration(v); ok && err == nil {
				if steps[k] == nil {
					order = append(order, k)
				}
				steps[k] = append(steps[k], dur)
			}
		}
	}
	for _, k := range order {
		benchkit.Report("  ptd create step: "+k, steps[k], nil)
	}
}
