package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
)

// codeBench measures the code API (docs/code-interpreter.md) in sandboxes
// of the code-interpreter template: create → first runCode("1+1") result
// (the kernel's start included: the sandbox is new) against create → first
// exec of `true` in the same template, and the steady-state runCode("1+1")
// round trip against an API exec of `true` in the same sandbox, the two
// interleaved so both see the same load.
func codeBench(c *benchkit.Client, n int) error {
	if err := c.EnsureTemplate("code-interpreter"); err != nil {
		return err
	}
	var first, firstExec []time.Duration
	for i := 0; i < max(n/5, 5); i++ {
		for _, mode := range []string{"code", "exec"} {
			t0 := time.Now()
			id, err := c.Create("code-interpreter")
			if err != nil {
				return err
			}
			if mode == "code" {
				if err := runCode(c, id, "1+1", "2"); err != nil {
					return err
				}
				first = append(first, time.Since(t0))
			} else {
				if _, err := c.Exec(id, []string{"true"}); err != nil {
					return err
				}
				firstExec = append(firstExec, time.Since(t0))
			}
			if err := c.Delete(id); err != nil {
				return err
			}
			c.WaitGone(id)
		}
	}
	benchkit.Report("create → first exec true (code-interpreter)", firstExec, nil)
	benchkit.Report("create → first runCode(1+1) result", first, firstExec)

	id, err := c.Create("code-interpreter")
	if err != nil {
		return err
	}
	defer c.Delete(id)
	if err := runCode(c, id, "1+1", "2"); err != nil { // kernel up
		return err
	}
	var steady, execs []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := runCode(c, id, "1+1", "2"); err != nil {
			return err
		}
		steady = append(steady, time.Since(t0))
		t1 := time.Now()
		if _, err := c.Exec(id, []string{"true"}); err != nil {
			return err
		}
		execs = append(execs, time.Since(t1))
	}
	benchkit.Report("API exec true (same sandbox)", execs, nil)
	benchkit.Report("steady-state runCode(1+1) round trip", steady, execs)
	return sdkCodeBench(c, n, first, steady)
}

// sdkCodeBench runs the real @e2b/code-interpreter SDK through the same two
// measures (tests/compat/e2b-code-interpreter/bench.mjs), with ratios
// against the native ones above. It is skipped, saying so, when that
// directory has no node_modules.
func sdkCodeBench(c *benchkit.Client, n int, nativeFirst, nativeSteady []time.Duration) error {
	dir := filepath.Join("tests", "compat", "e2b-code-interpreter")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@e2b", "code-interpreter")); err != nil {
		fmt.Printf("@e2b/code-interpreter: skipped (run `npm ci` in %s)\n", dir)
		return nil
	}
	cmd := exec.Command("node", "bench.mjs", "--json", "-n", fmt.Sprint(n), "--first", fmt.Sprint(len(nativeFirst)))
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

// runCode runs one Python cell through the native API and checks its
// main result's text.
func runCode(c *benchkit.Client, id, code, want string) error {
	b, _ := json.Marshal(map[string]any{"code": code})
	req, _ := http.NewRequest("POST", c.URL+"/v1/sandboxes/"+id+"/code", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("run code: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	got := ""
	for sc.Scan() {
		var ev struct {
			Type         string            `json:"type"`
			IsMainResult bool              `json:"is_main_result"`
			Data         map[string]string `json:"data"`
			Name, Value  string
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return err
		}
		switch {
		case ev.Type == "result" && ev.IsMainResult:
			got = ev.Data["text/plain"]
		case ev.Type == "error":
			return fmt.Errorf("run code %q: %s: %s", code, ev.Name, ev.Value)
		}
	}
	if strings.TrimSpace(got) != want {
		return fmt.Errorf("run code %q = %q, want %q", code, got, want)
	}
	return sc.Err()
}
