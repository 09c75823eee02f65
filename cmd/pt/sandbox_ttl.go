package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxKill is `pt sandbox kill ID...`: destroy sandboxes (docs/sandboxes.md,
// kill). Killing an already destroyed sandbox is not an error.
type sandboxKill struct{ app *app }

const sandboxKillSynopsis = "pt sandbox kill ID [ID...] [--json]"

// bind binds the flags; the returned run kills each sandbox and prints its
// ID, status and destroyed reason.
func (c *sandboxKill) bind(fs *flag.FlagSet) runFunc {
	asJSON := jsonFlag(fs, "print each destroyed record as JSON")
	return callRun(c.app, someArgs("want at least one sandbox ID"), func(ctx context.Context, cl *platinum.Client, pos []string) (struct{}, error) {
		for _, id := range pos {
			sb, err := cl.Sandboxes.Kill(ctx, id)
			if err != nil {
				return struct{}{}, err
			}
			if *asJSON {
				if err := writeJSON(c.app.stdout, sb); err != nil {
					return struct{}{}, err
				}
				continue
			}
			fmt.Fprintf(c.app.stdout, "%s\t%s\t%s\n", sb.ID, sb.Status, sb.DestroyedReason)
		}
		return struct{}{}, nil
	}, noOutput)
}

// sandboxTTL is `pt sandbox ttl ID DURATION`: reset a sandbox's countdown
// to DURATION from now.
type sandboxTTL struct{ app *app }

const sandboxTTLSynopsis = "pt sandbox ttl ID DURATION [--json]   (e.g. 30m, 2h; up to 24h since creation)"

// bind binds the flags; the returned run resets the TTL and prints the new
// expiry.
func (c *sandboxTTL) bind(fs *flag.FlagSet) runFunc {
	asJSON := jsonFlag(fs, "print the sandbox as JSON")
	var ttl time.Duration
	check := checks(exactArgs(2, "want a sandbox ID and a DURATION"), func(in *input) error {
		var err error
		if ttl, err = time.ParseDuration(in.pos[1]); err != nil || ttl < time.Millisecond {
			return in.usageErr("DURATION %q must be positive, like 30m or 2h", in.pos[1])
		}
		return nil
	})
	return callRun(c.app, check, func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Sandbox, error) {
		return cl.Sandboxes.SetTTL(ctx, pos[0], ttl)
	}, func(sb *platinum.Sandbox) error {
		if *asJSON {
			return printSandbox(c.app.stdout, sb, true)
		}
		exp := ""
		if sb.ExpiresAt != nil {
			exp = formatTime(*sb.ExpiresAt)
		}
		fmt.Fprintf(c.app.stdout, "%s expires at %s (%s)\n", sb.ID, exp, sb.Status)
		return nil
	})
}

// templateVersions is `pt template versions SLUG`: every build of a
// template, newest first.
type templateVersions struct{ app *app }

const templateVersionsSynopsis = "pt template versions SLUG [--json]"

// bind binds the flags; the returned run lists the versions.
func (c *templateVersions) bind(fs *flag.FlagSet) runFunc {
	asJSON := jsonFlag(fs, "print the versions as JSON")
	return callRun(c.app, exactArgs(1, "want exactly one template SLUG"), func(ctx context.Context, cl *platinum.Client, pos []string) ([]platinum.TemplateVersion, error) {
		return cl.Templates.Versions(ctx, pos[0])
	}, func(vs []platinum.TemplateVersion) error {
		if *asJSON {
			return writeRows(c.app.stdout, vs)
		}
		return writeTable(narrowTable(c.app.stdout), "VERSION\tID\tSTATUS\tSIZE\tCREATED", vs, func(v *platinum.TemplateVersion) []string {
			return []string{strconv.Itoa(v.Version), v.ID, string(v.Status), fmt.Sprintf("%d MB", v.SizeBytes>>20), formatTime(v.CreatedAt)}
		})
	})
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
