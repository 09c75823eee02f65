// Command sdk measures the SDKs' create → exec `true` → delete loop on one
// ptd in one run: the Go SDK in this process and every other client
// through its runner (a command printing per-run JSON timings), their runs
// interleaved in chunks so load that drifts during the run hits them
// alike. It prints p50/p95/p99 per client and each client's p50 ratio
// against the Go SDK. It needs root (a real ptd), node, and a built
// sdk/ts (`npm ci && npm run build` there).
//
//	go run ./bench/sdk [-n 50] [-gets 200] [-template busybox] [-clients go,ts] [-runner name='cmd args']
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/ptdtest"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// runners are the known clients besides Go: a command run from the repo
// root with --serve, -t and --warmup appended (bench/sdk/runner.mjs has the
// protocol). Add one with -runner.
var runners = map[string]string{
	"ts": "node bench/sdk/ts.mjs",
	// The same loop through node's fetch without the SDK: the TypeScript
	// SDK's ratio against it is what the SDK itself adds.
	"node-fetch": "node bench/sdk/fetch.mjs",
	// The Python SDK, in the venv scripts/test.sh makes.
	"py": "sdk/python/.venv/bin/python bench/sdk/py.py",
	// The Go SDK again, in a process of its own like the runners above:
	// beside the in-process baseline it shows what a separate process
	// costs on this machine, apart from any SDK.
	"go-proc": "go run ./bench/sdk/gorunner",
}

// run is one iteration's timings.
type run = benchkit.SDKRun

type runnerFlag map[string]string

func (r runnerFlag) String() string { return "" }

func (r runnerFlag) Set(v string) error {
	name, cmd, ok := strings.Cut(v, "=")
	if !ok || name == "" || cmd == "" {
		return fmt.Errorf("want name=command, got %q", v)
	}
	r[name] = cmd
	return nil
}

func main() { benchkit.Main("bench/sdk", mainErr) }

func mainErr() error {
	n := flag.Int("n", 50, "runs per client")
	tpl := flag.String("template", "busybox", "template")
	clients := flag.String("clients", defaultClients(), "clients to measure, in this order (go is the baseline)")
	chunk := flag.Int("chunk", 10, "runs per client before switching to the next (interleaving)")
	gets := flag.Int("gets", 200, "reads of one sandbox per client, timed one by one: each client's own cost per call (0 skips)")
	flag.Var(runnerFlag(runners), "runner", "name=command: a client runner (repeatable), e.g. rb='ruby bench/sdk/rb.rb'")
	flag.Parse()
	root, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	names := strings.Split(*clients, ",")
	for _, name := range names {
		if name != "go" && runners[name] == "" {
			return fmt.Errorf("unknown client %q (known: go and %v; add one with -runner)", name, keys(runners))
		}
	}
	if _, err := os.Stat(filepath.Join(root, "sdk", "ts", "dist", "esm", "index.js")); err != nil && strings.Contains(*clients, "ts") {
		return fmt.Errorf("build the TypeScript SDK first: (cd sdk/ts && npm ci && npm run build)")
	}
	d, err := ptdtest.Start(ptdtest.Options{RepoRoot: root})
	defer d.Stop()
	if err != nil {
		return err
	}
	c := platinum.New(d.URL, d.Token, platinum.WithPollInterval(20*time.Millisecond))
	if _, err := goLoop(c, 1, *tpl); err != nil { // builds the template and warms the client
		return err
	}
	fmt.Printf("SDKs: create (wait for running) → exec true → delete, %d runs each, template %s, %s\n\n", *n, *tpl, time.Now().UTC().Format(time.RFC3339))

	procs := map[string]*runner{}
	defer func() {
		for _, r := range procs {
			r.close()
		}
	}()
	for _, name := range names {
		if name == "go" {
			continue
		}
		r, err := startRunner(root, runners[name], d, *tpl)
		if err != nil {
			return err
		}
		procs[name] = r
		// Warm up through the protocol (untimed), one runner at a time and
		// before any timed run, so no warm-up overlaps a measured loop.
		if _, err := r.batch(2); err != nil {
			return fmt.Errorf("%s: warm-up: %w", name, err)
		}
	}
	got := map[string][]run{}
	for round, done := 0, 0; done < *n; round, done = round+1, done+*chunk {
		k := min(*chunk, *n-done)
		// Each round starts with the next client, so none always runs
		// right after the same one (or first).
		for i := range names {
			name := names[(i+round)%len(names)]
			var rs []run
			if name == "go" {
				rs, err = goLoop(c, k, *tpl)
			} else {
				rs, err = procs[name].batch(k)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			got[name] = append(got[name], rs...)
		}
	}
	rt, err := roundTrips(c, procs, names, *tpl, *gets)
	if err != nil {
		return err
	}
	base := series(got["go"], func(r run) float64 { return r.Total })
	for _, part := range []struct {
		label string
		f     func(run) float64
	}{
		{"create → exec → delete", func(r run) float64 { return r.Total }},
		{"create (wait_for_state=running)", func(r run) float64 { return r.Create }},
		{"exec true", func(r run) float64 { return r.Exec }},
		{"delete", func(r run) float64 { return r.Delete }},
	} {
		var baseline []time.Duration
		if _, ok := got["go"]; ok {
			baseline = series(got["go"], part.f)
		}
		for _, name := range names {
			ds := series(got[name], part.f)
			if name == "go" {
				benchkit.Report(name+" "+part.label, ds, nil)
			} else {
				benchkit.Report(name+" "+part.label, ds, baseline)
			}
		}
		fmt.Println()
	}
	if *gets > 0 {
		for _, name := range names {
			if name == "go" {
				benchkit.Report(name+" GET /v1/sandboxes/{id}", rt[name], nil)
			} else {
				benchkit.Report(name+" GET /v1/sandboxes/{id}", rt[name], rt["go"])
			}
		}
		for _, name := range names {
			if name != "go" && rt["go"] != nil {
				added := benchkit.Percentiles(rt[name])[0] - benchkit.Percentiles(rt["go"])[0]
				fmt.Printf("%s adds %s per call at p50 over the Go SDK (one read)\n", name, benchkit.MS(added))
			}
		}
		fmt.Println()
	}
	total := func(r run) float64 { return r.Total }
	for _, name := range names {
		if name != "go" && base != nil {
			fmt.Printf("%s vs Go SDK, create → exec → delete p50: %.3fx\n", name, benchkit.Ratio(series(got[name], total), base))
		}
	}
	if got["ts"] != nil && got["node-fetch"] != nil {
		fmt.Printf("ts SDK vs the same loop on node's fetch, p50: %.3fx\n", benchkit.Ratio(series(got["ts"], total), series(got["node-fetch"], total)))
	}
	if pr := got["go-proc"]; pr != nil {
		for _, name := range []string{"ts", "py"} {
			if got[name] != nil {
				fmt.Printf("%s vs the Go SDK in a process of its own (go-proc), p50: %.3fx\n", name, benchkit.Ratio(series(got[name], total), series(pr, total)))
			}
		}
	}
	// The target of the TypeScript and Python SDKs (issue 12): within 1.10x
	// of the Go SDK's loop, at the p50.
	for _, name := range []string{"ts", "py"} {
		if got[name] == nil || base == nil {
			continue
		}
		r := benchkit.Ratio(series(got[name], total), base)
		verdict := "met"
		if r > 1.10 {
			verdict = "missed"
		}
		fmt.Printf("target: %s ≤ 1.10x the Go SDK at p50: %s (%.3fx)\n", name, verdict, r)
	}
	return nil
}

// goLoop runs the loop n times through the Go SDK, waiting (untimed) for
// each teardown so runs never overlap one.
func goLoop(c *platinum.Client, n int, tpl string) ([]run, error) {
	ctx := context.Background()
	var out []run
	for range n {
		r, err := benchkit.SDKIteration(ctx, c, tpl)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// roundTrips times n reads of one running sandbox through every client, in
// chunks of n/4 that rotate like the loop's: a call ptd answers in well
// under a millisecond, so what differs between clients is their own cost
// per call (HTTP stack, JSON, the SDK's bookkeeping).
func roundTrips(c *platinum.Client, procs map[string]*runner, names []string, tpl string, n int) (map[string][]time.Duration, error) {
	out := map[string][]time.Duration{}
	if n <= 0 {
		return out, nil
	}
	ctx := context.Background()
	sb, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: tpl}, platinum.WaitForRunning(0))
	if err != nil {
		return nil, err
	}
	defer c.Sandboxes.Delete(ctx, sb.ID)
	per := max(n/4, 1)
	for round := 0; round*per < n; round++ {
		k := min(per, n-round*per)
		for i := range names {
			name := names[(i+round)%len(names)]
			if name != "go" {
				ds, err := procs[name].gets(sb.ID, k)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				out[name] = append(out[name], ds...)
				continue
			}
			for range k {
				t0 := time.Now()
				if _, err := c.Sandboxes.Get(ctx, sb.ID); err != nil {
					return nil, err
				}
				out[name] = append(out[name], time.Since(t0))
			}
		}
	}
	return out, nil
}

// runner is one client's runner process, kept for the whole bench so it
// stays warm (JIT, connections) like the in-process Go client; it answers
// each line written to its stdin with one iteration's JSON line
// (bench/sdk/runner.mjs, bench/sdk/py.py).
type runner struct {
	command string
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
}

func startRunner(root, command string, d *ptdtest.Daemon, tpl string) (*runner, error) {
	argv := append(strings.Fields(command), "--serve", "-t", tpl, "--warmup", "0")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stderr = root, os.Stderr
	cmd.Env = append(os.Environ(), "PT_API_URL="+d.URL, "PT_TOKEN="+d.Token)
	in, out, err := benchkit.Pipes(cmd)
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	return &runner{command: command, cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}, nil
}

// batch asks the runner for n runs, one line each, and decodes its answers.
func (r *runner) batch(n int) ([]run, error) {
	out := make([]run, 0, n)
	for range n {
		if _, err := io.WriteString(r.in, "\n"); err != nil {
			return nil, fmt.Errorf("%s: %w", r.command, err)
		}
		line, err := r.out.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("%s: reading its answer: %w", r.command, err)
		}
		var one run
		if err := json.Unmarshal(line, &one); err != nil || one.Total <= 0 {
			return nil, fmt.Errorf("%s printed %q (want {\"total_ms\":…,\"create_ms\":…,\"exec_ms\":…,\"delete_ms\":…}): %v", r.command, line, err)
		}
		out = append(out, one)
	}
	return out, nil
}

// gets asks the runner to read sandbox id n times ("get ID N") and decodes
// the time of each read.
func (r *runner) gets(id string, n int) ([]time.Duration, error) {
	if _, err := fmt.Fprintf(r.in, "get %s %d\n", id, n); err != nil {
		return nil, fmt.Errorf("%s: %w", r.command, err)
	}
	line, err := r.out.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("%s: reading its answer: %w", r.command, err)
	}
	var ans struct {
		GetMS []float64 `json:"get_ms"`
	}
	if err := json.Unmarshal(line, &ans); err != nil || len(ans.GetMS) != n {
		return nil, fmt.Errorf("%s printed %q (want {\"get_ms\":[…%d numbers]}): %v", r.command, line, n, err)
	}
	ds := make([]time.Duration, n)
	for i, ms := range ans.GetMS {
		ds[i] = time.Duration(ms * float64(time.Millisecond))
	}
	return ds, nil
}

// close ends the runner (EOF on its stdin) and waits for it.
func (r *runner) close() error {
	r.in.Close()
	return r.cmd.Wait()
}

func series(rs []run, f func(run) float64) []time.Duration {
	if rs == nil {
		return nil
	}
	out := make([]time.Duration, len(rs))
	for i, r := range rs {
		out[i] = time.Duration(f(r) * float64(time.Millisecond))
	}
	return out
}

// defaultClients is go, go-proc, ts and node-fetch, and py when the Python
// SDK's venv exists.
func defaultClients() string {
	if _, err := os.Stat("sdk/python/.venv/bin/python"); err == nil {
		return "go,go-proc,ts,node-fetch,py"
	}
	return "go,go-proc,ts,node-fetch"
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
