// Command e2b measures the real e2b SDK against ptd beside the same loop
// on the native API, in one run on one ptd: create → run `true` → kill,
// N times each, printed as p50/p95/p99 and p50 ratios against native.
// It needs root (a real ptd), node, and `npm ci` in tests/compat/e2b.
//
//	go run ./bench/e2b [-n 50] [-template pt-base]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
)

func main() { benchkit.Main("bench/e2b", run) }

func run() error {
	n := flag.Int("n", 50, "runs per loop")
	tpl := flag.String("template", "pt-base", "template (the SDK runs commands with bash, so not busybox)")
	flag.Parse()
	sdkDir, d, bc, err := benchkit.StartPtdForNode(filepath.Join("tests", "compat", "e2b"), "e2b")
	defer d.Stop()
	if err != nil {
		return err
	}
	c := &runner{*bc}
	if _, err := c.loop(1, *tpl, []string{"true"}); err != nil { // builds the template
		return err
	}
	fmt.Printf("E2B SDK vs native API: %d runs each, template %s, %s\n\n", *n, *tpl, time.Now().UTC().Format(time.RFC3339))

	// The three loops run interleaved in chunks, so load that drifts
	// during the run (other tests on the machine) hits all of them alike.
	var native, nativeBash times
	var sdk struct {
		CreateRun  []float64 `json:"create_run_ms"`
		Create     []float64 `json:"create_ms"`
		Kill       []float64 `json:"kill_ms"`
		NativeNode []float64 `json:"native_node_create_run_ms"`
	}
	const chunk = 10
	for done := 0; done < *n; done += chunk {
		k := min(chunk, *n-done)
		t, err := c.loop(k, *tpl, []string{"true"})
		if err != nil {
			return err
		}
		native.add(t)
		if t, err = c.loop(k, *tpl, []string{"/bin/bash", "-l", "-c", "true"}); err != nil {
			return err
		}
		nativeBash.add(t)
		out, err := benchkit.RunNode(sdkDir, []string{"E2B_API_URL=" + d.URL, "E2B_SANDBOX_URL=" + d.URL, "E2B_API_KEY=" + d.Token},
			"bench.mjs", "--json", "-n", fmt.Sprint(k), "-t", *tpl, "--warmup", "1")
		if err != nil {
			return err
		}
		var part struct {
			CreateRun  []float64 `json:"create_run_ms"`
			Create     []float64 `json:"create_ms"`
			Kill       []float64 `json:"kill_ms"`
			NativeNode []float64 `json:"native_node_create_run_ms"`
		}
		if err := json.Unmarshal(out, &part); err != nil {
			return fmt.Errorf("node bench.mjs output %q: %w", out, err)
		}
		sdk.CreateRun, sdk.Create, sdk.Kill = append(sdk.CreateRun, part.CreateRun...), append(sdk.Create, part.Create...), append(sdk.Kill, part.Kill...)
		sdk.NativeNode = append(sdk.NativeNode, part.NativeNode...)
	}
	benchkit.Report("native create → exec true", native.createRun, nil)
	benchkit.Report("native create → exec bash -l -c true", nativeBash.createRun, nil)
	benchkit.Report("SDK create → commands.run(\"true\")", millis(sdk.CreateRun), native.createRun)
	fmt.Printf("%-42s (the SDK runs every command as /bin/bash -l -c; vs the bash line: %.2fx)\n", "",
		benchkit.Ratio(millis(sdk.CreateRun), nativeBash.createRun))
	// The same native bash loop through node's fetch: the SDK against it
	// separates what ptd's E2B layer and the SDK's JS add from the gap
	// between node's and Go's HTTP clients.
	benchkit.Report("native bash loop via node fetch", millis(sdk.NativeNode), nil)
	fmt.Printf("%-42s (SDK vs the same loop from node: %.2fx)\n", "", benchkit.Ratio(millis(sdk.CreateRun), millis(sdk.NativeNode)))
	benchkit.Report("native create alone (wait_for_state)", native.create, nil)
	benchkit.Report("SDK create alone (POST /v2/sandboxes)", millis(sdk.Create), native.create)
	benchkit.Report("native delete (202)", native.kill, nil)
	benchkit.Report("SDK kill (204)", millis(sdk.Kill), native.kill)
	return nil
}

type times struct{ createRun, create, kill []time.Duration }

func (t *times) add(o times) {
	t.createRun, t.create, t.kill = append(t.createRun, o.createRun...), append(t.create, o.create...), append(t.kill, o.kill...)
}

// loop creates, runs argv, deletes; it waits (untimed) for each teardown
// so runs never overlap one, as bench.mjs does.
func (c *runner) loop(n int, tpl string, argv []string) (times, error) {
	var t times
	for i := 0; i < n; i++ {
		t0 := time.Now()
		st, b, err := c.Do("POST", "/v1/sandboxes?wait_for_state=running", map[string]any{"template": tpl})
		if err != nil || st != 201 {
			return t, fmt.Errorf("create: %d %s %v", st, b, err)
		}
		tc := time.Now()
		var sb struct{ ID string }
		json.Unmarshal(b, &sb)
		if st, b, err := c.Do("POST", "/v1/sandboxes/"+sb.ID+"/exec", map[string]any{"cmd": argv}); err != nil || st != 200 || !bytes.Contains(b, []byte(`"exit_code":0`)) {
			return t, fmt.Errorf("exec: %d %s %v", st, b, err)
		}
		t1 := time.Now()
		if st, b, err := c.Do("DELETE", "/v1/sandboxes/"+sb.ID, nil); err != nil || st != 202 {
			return t, fmt.Errorf("delete: %d %s %v", st, b, err)
		}
		t2 := time.Now()
		t.createRun, t.create, t.kill = append(t.createRun, t1.Sub(t0)), append(t.create, tc.Sub(t0)), append(t.kill, t2.Sub(t1))
		if err := c.WaitGone(sb.ID); err != nil {
			return t, err
		}
	}
	return t, nil
}

// runner runs the native loop.
type runner struct{ benchkit.Client }

func millis(ms []float64) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m * float64(time.Millisecond))
	}
	return out
}
