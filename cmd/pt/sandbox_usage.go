package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxUsage is `pt sandbox usage ID [--from T] [--to T]`: what a
// sandbox was billed for, in total and per stretch of one state and size.
type sandboxUsage struct{ app *app }

const sandboxUsageSynopsis = "pt sandbox usage ID [--from TIME] [--to TIME] [--json]\n\n" +
	"  TIME is RFC 3339 (2026-11-29T15:04:05Z) or a UTC date (2026-11-29). Only running\n" +
	"  bills compute; stopped bills storage; archived bills nothing."

// bind binds the flags; the returned run prints the totals and the periods,
// or the API's JSON.
func (c *sandboxUsage) bind(fs *flag.FlagSet) runFunc {
	var from, to string
	asJSON := jsonFlag(fs, "print the usage as JSON")
	fs.StringVar(&from, "from", "", "start of the window, `TIME` (default: when the sandbox was created)")
	fs.StringVar(&to, "to", "", "end of the window, `TIME` (default: now)")
	var window [2]time.Time
	check := checks(oneSandboxID, func(in *input) error {
		for i, v := range []struct{ name, val string }{{"--from", from}, {"--to", to}} {
			var err error
			if window[i], err = parseWhen(v.val); err != nil {
				return in.usageErr("%s: %v", v.name, err)
			}
		}
		return nil
	})
	return callRun(c.app, check, func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Usage, error) {
		return cl.Sandboxes.Usage(ctx, pos[0], window[0], window[1])
	}, jsonOr(c.app, asJSON, func(u *platinum.Usage) error {
		w := c.app.stdout
		printFields(w, [2]string{"Sandbox", u.ID}, [2]string{"From", formatTime(u.From)}, [2]string{"To", formatTime(u.To)},
			[2]string{"Compute", fmt.Sprintf("%s cpu-seconds, %s GB-RAM-seconds", formatAmount(u.CPUSeconds), formatAmount(u.RAMGBSeconds))},
			[2]string{"Storage", formatAmount(u.StorageGBHours) + " GB-hours"})
		if len(u.Periods) == 0 {
			return nil
		}
		fmt.Fprintln(w)
		return writeTable(table(w), strings.Join([]string{"STATE", "FROM", "TO", "CPU", "RAM", "DISK"}, "\t"), u.Periods, func(p *platinum.UsagePeriod) []string {
			return []string{string(p.State), formatTime(p.From), formatTime(p.To),
				formatCPU(p.CPU), fmt.Sprintf("%dMB", p.RAMMB), fmt.Sprintf("%dGB", p.DiskGB)}
		})
	}))
}

// parseWhen reads a --from/--to value: RFC 3339, or a date taken as UTC
// midnight. Empty is the zero time (the server's default).
func parseWhen(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("want an RFC 3339 time (2026-11-29T15:04:05Z) or a date (2026-11-29), got %q", s)
}

// formatAmount renders a billed amount with at most three decimals.
func formatAmount(v float64) string {
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}
