package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
)

// codeBench measures the code API (docs/code-interpreter.md) in sandboxes
// of the code-interpreter template, on each runtime class in runtimes:
//
//   - create → first runCode("1+1") result, `first` runs (the kernel's
//     start included: the sandbox is new), interleaved with create → first
//     exec of `true` in the same template, its baseline;
//   - the same create served warm from a pool of the class, against the
//     cold first result;
//   - the kernel's start on its own: create a context → its first
//     runCode("1+1") result, per language (python, javascript, bash), and
//     a Python context's restart → first result;
//   - the steady-state runCode("1+1") round trip, n runs, interleaved with
//     an API exec of `true` in the same sandbox, its baseline.
//
// Then the real @e2b/code-interpreter SDK through the first and steady
// measures on the harness's default class (runc).
func codeBench(c *benchkit.Client, n, first int, runtimes []string) error {
	if err := c.EnsureTemplate("code-interpreter"); err != nil {
		return err
	}
	var sdkFirst, sdkSteady []time.Duration
	for _, rt := range runtimes {
		fmt.Printf("\n-- runtime %s --\n", rt)
		f, st, err := codeBenchOn(c, rt, n, first)
		if err != nil {
			return fmt.Errorf("%s: %w", rt, err)
		}
		if sdkFirst == nil || rt == "runc" {
			sdkFirst, sdkSteady = f, st
		}
	}
	fmt.Println()
	return sdkCodeBench(c, n, len(sdkFirst), sdkFirst, sdkSteady)
}

// codeBenchOn runs the native measures on one runtime class and returns
// the first-result and steady-state samples.
func codeBenchOn(c *benchkit.Client, rt string, n, firstRuns int) (first, steady []time.Duration, err error) {
	var firstExec []time.Duration
	failed := 0
	for i := 0; i < firstRuns; i++ {
		for _, mode := range []string{"code", "exec"} {
			t0 := time.Now()
			id, _, err := createOn(c, "code-interpreter", rt)
			if err != nil {
				return nil, nil, err
			}
			if mode == "code" {
				if err := runCode(c, id, "", "1+1", "2"); err != nil {
					// Counted and shown, not timed: a broken run says so
					// instead of ending the bench.
					failed++
					ps, _ := c.Exec(id, []string{"ps", "-o", "pid,ppid,etime,args", "ax"})
					fmt.Printf("create → first runCode FAILED (run %d): %v\nprocesses: %s\n", i, err, ps)
				} else {
					first = append(first, time.Since(t0))
				}
			} else {
				if _, err := c.Exec(id, []string{"true"}); err != nil {
					return nil, nil, err
				}
				firstExec = append(firstExec, time.Since(t0))
			}
			if err := c.Delete(id); err != nil {
				return nil, nil, err
			}
			c.WaitGone(id)
		}
	}
	benchkit.Report("create → first exec true (code-interpreter)", firstExec, nil)
	benchkit.Report("create → first runCode(1+1) result", first, firstExec)
	if failed > 0 {
		fmt.Printf("create → first runCode: %d of %d runs FAILED (not in the figures above)\n", failed, firstRuns)
	}
	warm, err := warmFirstResults(c, rt, firstRuns)
	if err != nil {
		return nil, nil, err
	}
	benchkit.Report("warm create → first runCode(1+1) result", warm, first)

	id, _, err := createOn(c, "code-interpreter", rt)
	if err != nil {
		return nil, nil, err
	}
	defer c.Delete(id)
	if err := runCode(c, id, "", "1+1", "2"); err != nil { // the default kernel is up
		return nil, nil, err
	}
	// The kernel's start on its own: a context's process starts on create
	// (the server answers once it is ready), so create → first result is
	// the start plus one cell; restart → first result likewise.
	kernelRuns := max(n/5, 10)
	for _, lang := range []struct{ name, code, want string }{
		{"python", "1+1", "2"}, {"javascript", "1+1", "2"}, {"bash", "echo 2", ""},
	} {
		var starts []time.Duration
		for i := 0; i < kernelRuns; i++ {
			t0 := time.Now()
			st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/code/contexts", map[string]any{"language": lang.name})
			if err != nil || st != 201 {
				return nil, nil, fmt.Errorf("create %s context: %d %s %v", lang.name, st, b, err)
			}
			var cc struct{ ID string }
			json.Unmarshal(b, &cc)
			if err := runCode(c, id, cc.ID, lang.code, lang.want); err != nil {
				return nil, nil, err
			}
			starts = append(starts, time.Since(t0))
			if st, b, err := c.Do("DELETE", "/v1/sandboxes/"+id+"/code/contexts/"+cc.ID, nil); err != nil || st != 204 {
				return nil, nil, fmt.Errorf("delete context: %d %s %v", st, b, err)
			}
		}
		benchkit.Report("kernel start: new "+lang.name+" context → first result", starts, nil)
	}
	var restarts []time.Duration
	for i := 0; i < kernelRuns; i++ {
		t0 := time.Now()
		if st, b, err := c.Do("POST", "/v1/sandboxes/"+id+"/code/contexts/ctx_default_python/restart", nil); err != nil || st != 200 {
			return nil, nil, fmt.Errorf("restart: %d %s %v", st, b, err)
		}
		if err := runCode(c, id, "", "1+1", "2"); err != nil {
			return nil, nil, err
		}
		restarts = append(restarts, time.Since(t0))
	}
	benchkit.Report("kernel start: python restart → first result", restarts, nil)

	// Steady state is runCode called back to back, as a client running
	// cells in a loop does: blocks of steadyBlock cells alternate with
	// blocks of API execs of true in the same sandbox (the same-run
	// baseline), so both see the same load and neither runs in the
	// other's wake. A cell right after an exec (a client mixing the two)
	// is reported too: the exec's process is still being torn down in the
	// sandbox when it comes.
	var execs, afterExec []time.Duration
	for len(steady) < n {
		for range min(steadyBlock, n-len(steady)) {
			t0 := time.Now()
			if err := runCode(c, id, "", "1+1", "2"); err != nil {
				return nil, nil, err
			}
			steady = append(steady, time.Since(t0))
		}
		for range steadyBlock {
			t1 := time.Now()
			if _, err := c.Exec(id, []string{"true"}); err != nil {
				return nil, nil, err
			}
			execs = append(execs, time.Since(t1))
		}
		t0 := time.Now()
		if err := runCode(c, id, "", "1+1", "2"); err != nil {
			return nil, nil, err
		}
		afterExec = append(afterExec, time.Since(t0))
	}
	benchkit.Report("API exec true (same sandbox)", execs, nil)
	benchkit.Report("runCode(1+1) right after an exec", afterExec, execs)
	benchkit.Report("steady-state runCode(1+1) round trip", steady, execs)
	return first, steady, nil
}

// steadyBlock is how many steady-state cells, and then execs, run back to
// back before the other.
const steadyBlock = 5

// warmFirstResults times create → first runCode("1+1") result when the
// create is served warm (docs/sessions.md, "Warm creates"): a pool of one
// code-interpreter sandbox on class rt, claimable once its server's
// default Python kernel is up. Between runs (untimed) the pool refills;
// each run claims its sandbox as soon as the pool says it is ready.
func warmFirstResults(c *benchkit.Client, rt string, runs int) ([]time.Duration, error) {
	const tpl = "code-interpreter"
	if err := c.SetPool(tpl, rt, 1, 1); err != nil {
		return nil, err
	}
	defer c.SetPool(tpl, rt, 0, 0)
	var out []time.Duration
	for i := 0; i < runs; i++ {
		if err := c.WaitPool(tpl, rt, 1); err != nil {
			return nil, err
		}
		t0 := time.Now()
		id, start, err := createOn(c, tpl, rt)
		if err != nil {
			return nil, err
		}
		if start != "warm" {
			return nil, fmt.Errorf("warm run %d: create answered start %q with a ready pool", i, start)
		}
		if err := runCode(c, id, "", "1+1", "2"); err != nil {
			return nil, fmt.Errorf("warm run %d: %w", i, err)
		}
		out = append(out, time.Since(t0))
		if err := c.Delete(id); err != nil {
			return nil, err
		}
		c.WaitGone(id)
	}
	return out, nil
}

// createOn creates a running sandbox of tpl on runtime class rt and says
// whether it was served warm or booted cold (the answer's start).
func createOn(c *benchkit.Client, tpl, rt string) (id, start string, err error) {
	st, b, err := c.Do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": tpl, "runtime": rt})
	if err != nil || st != 201 {
		return "", "", fmt.Errorf("create %s on %s: %d %s %v", tpl, rt, st, b, err)
	}
	var sb struct{ ID, Start string }
	if err := json.Unmarshal(b, &sb); err != nil {
		return "", "", err
	}
	return sb.ID, sb.Start, nil
}

// sdkCodeBench runs the real @e2b/code-interpreter SDK through the same two
// measures (tests/compat/e2b-code-interpreter/bench.mjs), with ratios
// against the native ones above. It is skipped, saying so, when that
// directory has no node_modules.
func sdkCodeBench(c *benchkit.Client, n, first int, nativeFirst, nativeSteady []time.Duration) error {
	dir := filepath.Join("tests", "compat", "e2b-code-interpreter")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@e2b", "code-interpreter")); err != nil {
		fmt.Printf("@e2b/code-interpreter: skipped (run `npm ci` in %s)\n", dir)
		return nil
	}
	cmd := exec.Command("node", "bench.mjs", "--json", "-n", fmt.Sprint(n), "--first", fmt.Sprint(first))
	cmd.Dir, cmd.Stderr = dir, os.Stderr
	cmd.Env = append(os.Environ(), "E2B_API_URL="+c.URL, "E2B_SANDBOX_URL="+c.URL, "E2B_API_KEY="+c.Token)
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("node bench.mjs: %w", err)
	}
	var r struct {
		First  []float64 `json:"first_ms"`
		Steady []float64 `json:"steady_ms"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return fmt.Errorf("node bench.mjs: %w: %s", err, out)
	}
	ms := func(xs []float64) []time.Duration {
		ds := make([]time.Duration, len(xs))
		for i, x := range xs {
			ds[i] = time.Duration(x * float64(time.Millisecond))
		}
		return ds
	}
	benchkit.Report("@e2b/code-interpreter: create → first runCode(1+1) result", ms(r.First), nativeFirst)
	benchkit.Report("@e2b/code-interpreter: steady-state runCode(1+1) round trip", ms(r.Steady), nativeSteady)
	return nil
}

// runCode runs one cell through the native API (in context ctxID, or the
// default Python one) and checks its main result's text, or its stdout
// when want is "" (bash prints; it has no results).
func runCode(c *benchkit.Client, id, ctxID, code, want string) error {
	body := map[string]any{"code": code}
	if ctxID != "" {
		body["context_id"] = ctxID
	}
	b, _ := json.Marshal(body)
	req, _ := c.NewRequest(context.Background(), "POST", "/v1/sandboxes/"+id+"/code", bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("run code: %d %s", resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	got, seen := "", ""
	for sc.Scan() {
		seen += sc.Text() + "\n"
		var ev struct {
			Type         string            `json:"type"`
			IsMainResult bool              `json:"is_main_result"`
			Data         map[string]string `json:"data"`
			Name, Value  string
			Text         string
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return err
		}
		switch {
		case ev.Type == "result" && ev.IsMainResult:
			got = ev.Data["text/plain"]
		case ev.Type == "stdout" && want == "":
			got += ev.Text
		case ev.Type == "error":
			return fmt.Errorf("run code %q: %s: %s", code, ev.Name, ev.Value)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("run code %q: %w after %q", code, err, seen)
	}
	if want == "" {
		if strings.TrimSpace(got) == "" {
			return fmt.Errorf("run code %q printed nothing: %q", code, seen)
		}
	} else if strings.TrimSpace(got) != want {
		return fmt.Errorf("run code %q = %q, want %q (events %q)", code, got, want, seen)
	}
	return nil
}
