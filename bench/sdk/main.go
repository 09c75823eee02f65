// Command sdk measures the SDKs' create → exec `true` → delete loop on one
// ptd in one run: the Go SDK in this process and every other client
// through its runner (a command printing per-run JSON timings), their runs
// interleaved in chunks so load that drifts during the run hits them
// alike. It prints p50/p95/p99 per client and each client's p50 ratio
// against the Go SDK. It needs root (a real ptd), node, and a built
// sdk/ts (`npm ci && npm run build` there).
//
//	go run ./bench/sdk [-n 50] [-template busybox] [-clients go,ts] [-runner name='cmd args']
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
}

// run is one iteration's timings.
type run struct {
	Total  float64 `json:"total_ms"`
	Create float64 `json:"create_ms"`
	Exec   float64 `json:"exec_ms"`
	Delete float64 `json:"delete_ms"`
}

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

func main() {
	if err := mainErr(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/sdk:", err)
		os.Exit(1)
	}
}

func mainErr() error {
	n := flag.Int("n", 50, "runs per client")
	tpl := flag.String("template", "busybox", "template")
	clients := flag.String("clients", defaultClients(), "clients to measure, in this order (go is the baseline)")
	chunk := flag.Int("chunk", 10, "runs per client before switching to the next (interleaving)")
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
	}
	got := map[string][]run{}
	for done := 0; done < *n; done += *chunk {
		k := min(*chunk, *n-done)
		for _, name := range names {
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
	total := func(r run) float64 { return r.Total }
	for _, name := range names {
		if name != "go" && base != nil {
			fmt.Printf("%s vs Go SDK, create → exec → delete p50: %.3fx\n", name, benchkit.Ratio(series(got[name], total), base))
		}
	}
	if got["ts"] != nil && got["node-fetch"] != nil {
		fmt.Printf("ts SDK vs the same loop on node's fetch, p50: %.3fx\n", benchkit.Ratio(series(got["ts"], total), series(got["node-fetch"], total)))
	}
	if got["ts"] != nil && base != nil {
		fmt.Printf("target: ts ≤ 1.10x the Go SDK\n")
	}
	return nil
}

// goLoop runs the loop n times through the Go SDK, waiting (untimed) for
// each teardown so runs never overlap one.
func goLoop(c *platinum.Client, n int, tpl string) ([]run, error) {
	ctx := context.Background()
	var out []run
	for range n {
		t0 := time.Now()
		sb, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: tpl}, platinum.WaitForRunning(0))
		if err != nil {
			return nil, err
		}
		t1 := time.Now()
		res, err := c.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Cmd: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			return nil, fmt.Errorf("exec true: %v %+v", err, res)
		}
		t2 := time.Now()
		if _, err := c.Sandboxes.Delete(ctx, sb.ID); err != nil {
			return nil, err
		}
		t3 := time.Now()
		if _, err := c.Sandboxes.WaitForState(ctx, sb.ID, platinum.StateDeleted); err != nil {
			return nil, err
		}
		out = append(out, run{Total: ms(t3.Sub(t0)), Create: ms(t1.Sub(t0)), Exec: ms(t2.Sub(t1)), Delete: ms(t3.Sub(t2))})
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
	argv := append(strings.Fields(command), "--serve", "-t", tpl, "--warmup", "2")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stderr = root, os.Stderr
	cmd.Env = append(os.Environ(), "PT_API_URL="+d.URL, "PT_TOKEN="+d.Token)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
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

// defaultClients is go, ts and node-fetch, and py when the Python SDK's
// venv exists.
func defaultClients() string {
	if _, err := os.Stat("sdk/python/.venv/bin/python"); err == nil {
		return "go,ts,node-fetch,py"
	}
	return "go,ts,node-fetch"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
