// Command warm measures create → first exec of a busybox sandbox served
// warm (its template's pool handed it over, docs/sessions.md "Warm
// creates") beside the same create served cold (booted for it), in
// alternating runs on one ptd so both see the same load; the cold runs are
// the baseline. Each create carries its own env and metadata, so the warm
// path is measured with the hand-over it does for a real caller. The pool
// is turned off for a cold run and on again (and waited ready) for a warm
// one; those waits are not timed. One ptd per runtime class, each with it
// as the default class (pools hold the default class). It needs root and
// scripts/setup.sh.
//
//	go run ./bench/warm [-n 30] [-classes runc,gvisor]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
)

func main() { benchkit.Main("bench/warm", run) }

func run() error {
	n := flag.Int("n", 30, "runs per path and class")
	classes := flag.String("classes", "runc,gvisor", "runtime classes to measure")
	flag.Parse()
	fmt.Printf("create → first exec, busybox with env and metadata, warm vs cold (baseline), n=%d per path\n", *n)
	for _, class := range strings.Split(*classes, ",") {
		if _, err := exec.LookPath(map[string]string{"gvisor": "runsc", "runc": "runc"}[class]); err != nil {
			fmt.Printf("%s: not installed here, skipped\n", class)
			continue
		}
		if err := measure(class, *n); err != nil {
			return fmt.Errorf("%s: %w", class, err)
		}
	}
	return nil
}

func measure(class string, n int) error {
	d, c, err := benchkit.StartPtd("--log-level", "warn", "--default-runtime", class)
	defer d.Stop()
	if err != nil {
		return err
	}
	if err := c.EnsureTemplate("busybox"); err != nil {
		return err
	}
	var warm, cold []time.Duration
	for i := range 2 * n {
		wantWarm := i%2 == 0
		if err := setPool(c, wantWarm); err != nil {
			return err
		}
		took, start, err := createFirstExec(c, i)
		if err != nil {
			return err
		}
		if (start == "warm") != wantWarm {
			return fmt.Errorf("run %d: start %q, want warm=%v", i, start, wantWarm)
		}
		if wantWarm {
			warm = append(warm, took)
		} else {
			cold = append(cold, took)
		}
	}
	benchkit.Report(class+" cold create → first exec (baseline)", cold, nil)
	benchkit.Report(class+" warm create → first exec", warm, cold)
	return nil
}

// setPool turns busybox's pool on (one ready sandbox, waited for) or off
// (nothing pooled, waited for).
func setPool(c *benchkit.Client, on bool) error {
	if on {
		return c.SetPool("busybox", "", 1, 1)
	}
	return c.SetPool("busybox", "", 0, 0)
}

// createFirstExec times POST /v1/sandboxes (waiting for running) then the
// first exec's answer, deletes the sandbox and waits for its teardown.
func createFirstExec(c *benchkit.Client, i int) (time.Duration, string, error) {
	body := map[string]any{"template": "busybox", "env": map[string]any{"RUN": fmt.Sprint(i)},
		"metadata": map[string]any{"bench": "warm"}}
	start := time.Now()
	st, b, err := c.Do("POST", "/v1/sandboxes?wait_for_state=running&wait_timeout_ms=300000", body)
	if err != nil || st != 201 {
		return 0, "", fmt.Errorf("create: %d %s %v", st, b, err)
	}
	var m struct{ ID, State, Start string }
	json.Unmarshal(b, &m)
	out, err := c.Exec(m.ID, []string{"sh", "-c", "echo $RUN"})
	took := time.Since(start)
	defer func() { c.Delete(m.ID); c.WaitGone(m.ID) }()
	if err != nil {
		return 0, "", err
	}
	if !bytes.Contains([]byte(out), []byte(`"stdout":"`+fmt.Sprint(i)+`\n"`)) {
		return 0, "", fmt.Errorf("run %d: the first exec saw %s", i, out)
	}
	return took, m.Start, nil
}
