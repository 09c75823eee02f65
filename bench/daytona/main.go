// Command daytona measures the real @daytonaio/sdk against ptd beside the
// same loop on the native API driven from node, in one run on one ptd:
// create → executeCommand("true") → delete, N times each, interleaved,
// printed as p50/p95/p99 and p50 ratios against native. It needs root (a
// real ptd), node, and `npm ci` in tests/compat/daytona.
//
//	go run ./bench/daytona [-n 50] [-template busybox]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
)

func main() { benchkit.Main("bench/daytona", run) }

type sample struct {
	Total  float64 `json:"total"`
	Create float64 `json:"create"`
	Exec   float64 `json:"exec"`
	Del    float64 `json:"del"`
}

func run() error {
	n := flag.Int("n", 50, "runs per loop")
	tpl := flag.String("template", "busybox", "template")
	flag.Parse()
	sdkDir, d, _, err := benchkit.StartPtdForNode(filepath.Join("tests", "compat", "daytona"), filepath.Join("@daytonaio", "sdk"))
	defer d.Stop()
	if err != nil {
		return err
	}
	fmt.Printf("Daytona SDK vs native API (both from node): %d runs each, template %s, %s\n\n", *n, *tpl, time.Now().UTC().Format(time.RFC3339))
	out, err := benchkit.RunNode(sdkDir, []string{"PT_API_URL=" + d.URL, "PT_TOKEN=" + d.Token}, "bench.mjs", "--json", "-n", fmt.Sprint(*n), "-t", *tpl)
	if err != nil {
		return err
	}
	var res struct{ SDK, Native []sample }
	if err := json.Unmarshal(out, &res); err != nil {
		return fmt.Errorf("node bench.mjs output %q: %w", out, err)
	}
	for _, part := range []struct {
		name string
		get  func(sample) float64
	}{
		{"create → exec true → delete", func(s sample) float64 { return s.Total }},
		{"create (answers started)", func(s sample) float64 { return s.Create }},
		{"exec true", func(s sample) float64 { return s.Exec }},
		{"delete", func(s sample) float64 { return s.Del }},
	} {
		native, sdk := millis(res.Native, part.get), millis(res.SDK, part.get)
		benchkit.Report("native "+part.name, native, nil)
		benchkit.Report("SDK    "+part.name, sdk, native)
	}
	return nil
}

func millis(xs []sample, get func(sample) float64) []time.Duration {
	out := make([]time.Duration, len(xs))
	for i, x := range xs {
		out[i] = time.Duration(get(x) * float64(time.Millisecond))
	}
	return out
}
