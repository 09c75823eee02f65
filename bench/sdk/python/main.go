// Command sdk benchmarks the SDKs against each other in one run: create
// (waiting until running) → exec `true` → delete, N times, through the Go
// SDK in process and through each language's runner script, which prints
// one JSON line per iteration ({"ms": …}). The Go SDK is the baseline of
// the ratios. The runner is started once with --serve and runs one
// iteration per line it reads, so the SDKs alternate iteration by
// iteration and see the same load. It starts its own ptd, so it needs root.
//
//	go run ./bench/sdk [-n 50] [-template busybox]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/ptdtest"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/sdk/python:", err)
		os.Exit(1)
	}
}

// iteration is one create → exec → delete, split by phase.
type iteration struct {
	Total, Create, Exec, Delete time.Duration
}

func run() error {
	n := flag.Int("n", 50, "iterations per SDK")
	tpl := flag.String("template", "busybox", "template of the sandboxes")
	flag.Parse()
	root, err := filepath.Abs(".") // run from the repository root
	if err != nil {
		return err
	}
	py := filepath.Join(root, "sdk", "python", ".venv", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		return fmt.Errorf("%s: make the Python SDK's venv first (scripts/test.sh does): %w", py, err)
	}
	d, err := ptdtest.Start(ptdtest.Options{RepoRoot: root})
	defer d.Stop()
	if err != nil {
		return err
	}
	bc := &benchkit.Client{URL: d.URL, Token: d.Token}
	if err := bc.EnsureTemplate(*tpl); err != nil {
		return err
	}
	c := platinum.New(d.URL, d.Token, platinum.WithPollInterval(20*time.Millisecond))
	ctx := context.Background()
	// One untimed iteration each: connections, the template's first use.
	if _, err := goIteration(ctx, c, *tpl); err != nil {
		return err
	}
	py3, err := startRunner(d, []string{py, filepath.Join(root, "bench", "sdk", "py.py"), "--serve", "--template", *tpl})
	if err != nil {
		return err
	}
	defer py3.stop()
	var goRuns, pyRuns []iteration
	for range *n {
		if err := settle(bc); err != nil {
			return err
		}
		it, err := goIteration(ctx, c, *tpl)
		if err != nil {
			return err
		}
		goRuns = append(goRuns, it)
		if err := settle(bc); err != nil {
			return err
		}
		if it, err = py3.iteration(); err != nil {
			return err
		}
		pyRuns = append(pyRuns, it)
	}
	fmt.Printf("SDK create(wait running) → exec true → delete on %s, %d iterations each, Go SDK as the baseline\n", *tpl, *n)
	for _, phase := range []struct {
		name string
		get  func(iteration) time.Duration
	}{
		{"total", func(i iteration) time.Duration { return i.Total }},
		{"create", func(i iteration) time.Duration { return i.Create }},
		{"exec", func(i iteration) time.Duration { return i.Exec }},
		{"delete", func(i iteration) time.Duration { return i.Delete }},
	} {
		g, p := pick(goRuns, phase.get), pick(pyRuns, phase.get)
		benchkit.Report("go sdk     "+phase.name, g, nil)
		benchkit.Report("python sdk "+phase.name, p, g)
	}
	return nil
}

func pick(its []iteration, f func(iteration) time.Duration) []time.Duration {
	out := make([]time.Duration, len(its))
	for i, it := range its {
		out[i] = f(it)
	}
	return out
}

// goIteration is the loop the runner scripts do, through the Go SDK.
func goIteration(ctx context.Context, c *platinum.Client, tpl string) (iteration, error) {
	t0 := time.Now()
	sb, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: tpl}, platinum.WaitForRunning(5*time.Minute))
	if err != nil {
		return iteration{}, err
	}
	t1 := time.Now()
	res, err := c.Sandboxes.Exec(ctx, sb.ID, platinum.ExecRequest{Cmd: []string{"true"}})
	if err != nil {
		return iteration{}, err
	}
	if res.ExitCode != 0 {
		return iteration{}, fmt.Errorf("exec true: exit %d", res.ExitCode)
	}
	t2 := time.Now()
	if _, err := c.Sandboxes.Delete(ctx, sb.ID); err != nil {
		return iteration{}, err
	}
	t3 := time.Now()
	return iteration{Total: t3.Sub(t0), Create: t1.Sub(t0), Exec: t2.Sub(t1), Delete: t3.Sub(t2)}, nil
}

// runner is one language's runner script in --serve mode.
type runner struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *bytes.Buffer
}

func startRunner(d *ptdtest.Daemon, argv []string) (*runner, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PT_API_URL="+d.URL, "PT_TOKEN="+d.Token)
	r := &runner{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = r.stderr
	in, out, err := benchkit.Pipes(cmd)
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r.in, r.out = in, bufio.NewScanner(out)
	return r, nil
}

// iteration asks for one iteration and reads its JSON line.
func (r *runner) iteration() (iteration, error) {
	if _, err := io.WriteString(r.in, "go\n"); err != nil {
		return iteration{}, fmt.Errorf("runner: %w: %s", err, r.stderr)
	}
	if !r.out.Scan() {
		return iteration{}, fmt.Errorf("runner ended: %v: %s", r.out.Err(), r.stderr)
	}
	var line struct {
		MS       float64 `json:"ms"`
		CreateMS float64 `json:"create_ms"`
		ExecMS   float64 `json:"exec_ms"`
		DeleteMS float64 `json:"delete_ms"`
	}
	if err := json.Unmarshal(r.out.Bytes(), &line); err != nil {
		return iteration{}, fmt.Errorf("runner printed %q: %w", r.out.Text(), err)
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	return iteration{Total: ms(line.MS), Create: ms(line.CreateMS), Exec: ms(line.ExecMS), Delete: ms(line.DeleteMS)}, nil
}

// stop closes the runner's stdin, which ends it.
func (r *runner) stop() {
	r.in.Close()
	r.cmd.Wait()
}

// settle waits until no sandbox is left tearing down.
func settle(c *benchkit.Client) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		st, body, err := c.Do("GET", "/v1/sandboxes?include=destroyed,failed&limit=200", nil)
		if err != nil {
			return err
		}
		var l struct{ Rows []struct{ State string } }
		if err := json.Unmarshal(body, &l); err != nil {
			return err
		}
		busy := 0
		for _, r := range l.Rows {
			if r.State != "deleted" {
				busy++
			}
		}
		if st == 200 && busy == 0 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("sandboxes still tearing down after 2 minutes")
}
