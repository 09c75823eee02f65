package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// sandboxKill is `pt sandbox kill ID...`: destroy sandboxes (docs/sandboxes.md,
// kill). Killing an already destroyed sandbox is not an error.
type sandboxKill struct{ app *app }

const sandboxKillSynopsis = "pt sandbox kill ID [ID...] [--json]"

// bind binds the flags; the returned run kills each sandbox and prints its
// ID, status and destroyed reason.
func (c *sandboxKill) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print each destroyed record as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) == 0 {
			return in.usageErr("want at least one sandbox ID")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		for _, id := range pos {
			sb, err := cl.Sandboxes.Kill(ctx, id)
			if err != nil {
				return err
			}
			if *asJSON {
				if err := writeJSON(c.app.stdout, sb); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(c.app.stdout, "%s\t%s\t%s\n", sb.ID, sb.Status, sb.DestroyedReason)
		}
		return nil
	}
}

// sandboxTTL is `pt sandbox ttl ID DURATION`: reset a sandbox's countdown
// to DURATION from now.
type sandboxTTL struct{ app *app }

const sandboxTTLSynopsis = "pt sandbox ttl ID DURATION [--json]   (e.g. 30m, 2h; up to 24h since creation)"

// bind binds the flags; the returned run resets the TTL and prints the new
// expiry.
func (c *sandboxTTL) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print the sandbox as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		usage := in.usage
		if len(pos) != 2 {
			return usageErr(usage, "want a sandbox ID and a DURATION")
		}
		ttl, err := time.ParseDuration(pos[1])
		if err != nil || ttl < time.Millisecond {
			return usageErr(usage, "DURATION %q must be positive, like 30m or 2h", pos[1])
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		sb, err := cl.Sandboxes.SetTTL(ctx, pos[0], ttl)
		if err != nil {
			return err
		}
		if *asJSON {
			return printSandbox(c.app.stdout, sb, true)
		}
		exp := ""
		if sb.ExpiresAt != nil {
			exp = formatTime(*sb.ExpiresAt)
		}
		fmt.Fprintf(c.app.stdout, "%s expires at %s (%s)\n", sb.ID, exp, sb.Status)
		return nil
	}
}

// templateVersions is `pt template versions SLUG`: every build of a
// template, newest first.
type templateVersions struct{ app *app }

const templateVersionsSynopsis = "pt template versions SLUG [--json]"

// bind binds the flags; the returned run lists the versions.
func (c *templateVersions) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print the versions as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) != 1 {
			return in.usageErr("want exactly one template SLUG")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		vs, err := cl.Templates.Versions(ctx, pos[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, map[string]any{"rows": vs})
		}
		tw := tabwriter.NewWriter(c.app.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tID\tSTATUS\tSIZE\tCREATED")
		for _, v := range vs {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d MB\t%s\n", v.Version, v.ID, v.Status, v.SizeBytes>>20, formatTime(v.CreatedAt))
		}
		return tw.Flush()
	}
}

// durationMsFlag is a duration flag stored as whole milliseconds.
type durationMsFlag struct{ ms *int64 }

func (f durationMsFlag) String() string {
	if f.ms == nil || *f.ms == 0 {
		return ""
	}
	return (time.Duration(*f.ms) * time.Millisecond).String()
}

func (f durationMsFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Millisecond {
		return fmt.Errorf("want a positive duration like 10m or 1h")
	}
	*f.ms = d.Milliseconds()
	return nil
}

// includeFlag is a comma-separated (or repeated) list flag.
type includeFlag struct{ v *[]string }

func (f includeFlag) String() string {
	if f.v == nil {
		return ""
	}
	return strings.Join(*f.v, ",")
}

func (f includeFlag) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*f.v = append(*f.v, part)
		}
	}
	return nil
}
