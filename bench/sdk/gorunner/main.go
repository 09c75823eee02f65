// Command gorunner is the Go SDK's runner for `go run ./bench/sdk` (client
// go-proc): the same create (wait for running) → exec `true` → delete loop
// as the in-process Go baseline, but in a process of its own that speaks
// the runner protocol (bench/sdk/runner.mjs) like the TypeScript and Python
// runners. Beside the baseline it shows what running in a separate
// process costs on this machine, apart from any SDK.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gorunner:", err)
		os.Exit(1)
	}
}

func run() error {
	tpl := flag.String("t", "busybox", "template")
	warmup := flag.Int("warmup", 1, "untimed runs first")
	serve := flag.Bool("serve", false, "one run per stdin line, printed as a JSON line")
	n := flag.Int("n", 50, "timed runs (without -serve)")
	flag.Parse()
	c := platinum.New(os.Getenv("PT_API_URL"), os.Getenv("PT_TOKEN"), platinum.WithPollInterval(20*time.Millisecond))
	ctx := context.Background()
	for range *warmup {
		if _, err := once(ctx, c, *tpl); err != nil {
			return err
		}
	}
	out := json.NewEncoder(os.Stdout)
	if !*serve {
		var runs []map[string]float64
		for range *n {
			r, err := once(ctx, c, *tpl)
			if err != nil {
				return err
			}
			runs = append(runs, r)
		}
		return out.Encode(map[string]any{"client": "go-proc", "runs": runs})
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if f := strings.Fields(in.Text()); len(f) == 3 && f[0] == "get" {
			k, err := strconv.Atoi(f[2])
			if err != nil {
				return err
			}
			ms := make([]float64, 0, k)
			for range k {
				t0 := time.Now()
				if _, err := c.Sandboxes.Get(ctx, f[1]); err != nil {
					return err
				}
				ms = append(ms, msSince(t0))
			}
			if err := out.Encode(map[string][]float64{"get_ms": ms}); err != nil {
				return err
			}
			continue
		}
		r, err := once(ctx, c, *tpl)
		if err != nil {
			return err
		}
		r["ms"] = r["total_ms"]
		if err := out.Encode(r); err != nil {
			return err
		}
	}
	return in.Err()
}

// once is one iteration, then an untimed wait for the teardown.
func once(ctx context.Context, c *platinum.Client, tpl string) (map[string]float64, error) {
	r, err := benchkit.SDKIteration(ctx, c, tpl)
	if err != nil {
		return nil, err
	}
	return map[string]float64{"total_ms": r.Total, "create_ms": r.Create, "exec_ms": r.Exec, "delete_ms": r.Delete}, nil
}

func msSince(t time.Time) float64 { return benchkit.Millis(time.Since(t)) }
