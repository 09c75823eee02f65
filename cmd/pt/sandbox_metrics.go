package main

import (
	"flag"
	"fmt"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxMetrics is `pt sandbox metrics ID`: a running sandbox's live
// CPU, memory, disk, network and process figures.
type sandboxMetrics struct{ app *app }

const sandboxMetricsSynopsis = "pt sandbox metrics ID [--json]"

// bind binds the flags; the returned run prints the figures as a field list,
// or the API's JSON.
func (c *sandboxMetrics) bind(fs *flag.FlagSet) runFunc {
	asJSON := jsonFlag(fs, "print the metrics as JSON")
	return callRun(c.app, oneSandboxID, onSandbox((*platinum.SandboxesService).Metrics), jsonOr(c.app, asJSON, func(m *platinum.Metrics) error {
		printMetrics(c.app, m)
		return nil
	}))
}

// printMetrics shows metrics as a field list, sizes in binary units.
func printMetrics(a *app, m *platinum.Metrics) {
	tw := table(a.stdout)
	field := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	field("CPU", fmt.Sprintf("%.1f%%", m.CPUPercent))
	field("Memory", ofTotal(m.MemoryUsedBytes, m.MemoryLimitBytes))
	field("Disk", ofTotal(m.DiskUsedBytes, m.DiskSizeBytes))
	field("Network", fmt.Sprintf("%s in, %s out", formatBytes(m.NetRxBytes), formatBytes(m.NetTxBytes)))
	field("Processes", fmt.Sprint(m.PIDs))
	field("At", formatTime(m.At))
	tw.Flush()
}

// ofTotal renders "used of total (pct)", e.g. "128.0 MiB of 512.0 MiB (25%)".
func ofTotal(used, total int64) string {
	if total <= 0 {
		return formatBytes(used)
	}
	return fmt.Sprintf("%s of %s (%.0f%%)", formatBytes(used), formatBytes(total), 100*float64(used)/float64(total))
}
