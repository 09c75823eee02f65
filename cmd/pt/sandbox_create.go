package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxCreate is `pt sandbox create`: create a sandbox and, unless
// --no-wait, wait until it runs, showing the template's build progress
// meanwhile (a first sandbox of an unbuilt template waits for the build).
type sandboxCreate struct{ app *app }

const sandboxCreateSynopsis = "pt sandbox create -t TEMPLATE [--cpu N] [--ram MB] [--disk GB] [--name NAME] [--env K=V]... [--metadata K=V]... [--type persistent|ephemeral|dev] [--auto-stop M] [--auto-archive D] [--auto-delete D] [--parent ID] [--project PRJ_ID] [--region NAME] [--idempotency-key KEY] [--no-auto-resume] [--no-wait] [--timeout 10m] [--json]"

// bind binds the flags; the returned run creates the sandbox and prints it.
func (c *sandboxCreate) bind(fs *flag.FlagSet) runFunc {
	var (
		req     platinum.CreateSandboxRequest
		env     = kvFlag{}
		md      = kvFlag{}
		noWait  bool
		noAuto  bool
		timeout time.Duration
		asJSON  bool
		typ     string
		timers  = map[string]*int{"auto-stop": new(0), "auto-archive": new(0), "auto-delete": new(0)}
	)
	fs.StringVar(&req.Template, "t", "", "template `SLUG` (short for --template)")
	fs.StringVar(&req.Template, "template", "", "template `SLUG`, e.g. pt-base (required)")
	fs.StringVar(&req.TemplateVersionID, "template-version", "", "pin template version `TPLV_ID` (instead of --template; see `pt template versions`)")
	fs.Var(durationMsFlag{&req.TTLMs}, "ttl", "lifetime `DURATION`, e.g. 10m, at most 1h; the sandbox is destroyed when it runs out (default 1h for python-node and node, none for others)")
	fs.StringVar(&req.FromSnapshot, "from-snapshot", "", "make the sandbox from snapshot `SNAP_ID` (template and size come from it)")
	fs.StringVar(&req.FromBackup, "from-backup", "", "make the sandbox from backup `BKP_ID`, on any host sharing the object store")
	fs.Float64Var(&req.CPU, "cpu", 0, "vCPUs (default 1)")
	fs.IntVar(&req.RAMMB, "ram", 0, "memory in `MB` (default 512)")
	fs.IntVar(&req.DiskGB, "disk", 0, "disk in `GB` (default 2)")
	fs.StringVar(&req.Name, "name", "", "a `NAME` for the sandbox")
	fs.Var(env, "env", "environment variable `K=V` (repeatable)")
	fs.Var(md, "metadata", "metadata `K=V` (repeatable)")
	var allowOut, denyOut listFlag
	egress := fs.String("egress", "", "network egress `allow|deny` for traffic no list matches (default allow; see `pt sandbox network`)")
	fs.Var(&allowOut, "allow-out", "allow outbound to an IPv4 `CIDR`, address or domain (repeatable, or comma-separated)")
	fs.Var(&denyOut, "deny-out", "deny outbound to an IPv4 `CIDR` or address (repeatable, or comma-separated)")
	fs.StringVar(&typ, "type", "", "retention `TYPE`: persistent, ephemeral (deleted when it stops) or dev (default persistent)")
	fs.IntVar(timers["auto-stop"], "auto-stop", 0, "stop after `M` idle minutes; 0 never (default by type: persistent 60, ephemeral 15, dev 120)")
	fs.IntVar(timers["auto-archive"], "auto-archive", 0, "archive `D` days after it stops; 0 never (default by type: persistent 7, dev 30)")
	fs.IntVar(timers["auto-delete"], "auto-delete", 0, "delete `D` days after it stops; 0 never (the default)")
	fs.StringVar(&req.ParentID, "parent", "", "make the sandbox a child of sandbox `ID`, which must be running")
	fs.StringVar(&req.ProjectID, "project", "", "create the sandbox in project `PRJ_ID` (default: the parent's, else the org's default project)")
	fs.StringVar(&req.Region, "region", "", "make the sandbox in region `NAME` (default: the API's own; see docs/operating.md, \"Regions\")")
	fs.StringVar(&req.IdempotencyKey, "idempotency-key", "", "idempotency `KEY`: running the same command again with it returns the first sandbox (24 h)")
	fs.BoolVar(&noAuto, "no-auto-resume", false, "a preview-URL request does not start the sandbox while it is stopped; only `pt sandbox start` does")
	fs.BoolVar(&noWait, "no-wait", false, "return at once, while the sandbox is still creating")
	fs.DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for the sandbox to run")
	fs.BoolVar(&asJSON, "json", false, "print the sandbox as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		usage := in.usage
		switch {
		case len(pos) > 0:
			return usageErr(usage, "unexpected argument %q", pos[0])
		case req.Template == "" && req.TemplateVersionID == "" && req.FromSnapshot == "" && req.FromBackup == "":
			return usageErr(usage, "--template is required (see `pt template list`)")
		case timeout <= 0:
			return usageErr(usage, "--timeout must be positive")
		}
		req.Env, req.Metadata, req.Type = env.orNil(), md.orNil(), platinum.SandboxType(typ)
		if *egress != "" || len(allowOut) > 0 || len(denyOut) > 0 {
			req.Network = &platinum.NetworkPolicy{Egress: *egress, AllowOut: splitList(allowOut), DenyOut: splitList(denyOut)}
		}
		if noAuto {
			req.AutoResume = new(false)
		}
		// Only timers given on the command line override the type's defaults:
		// an explicit 0 disables one.
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "auto-stop":
				req.AutoStopMinutes = timers[f.Name]
			case "auto-archive":
				req.AutoArchiveDays = timers[f.Name]
			case "auto-delete":
				req.AutoDeleteDays = timers[f.Name]
			}
		})

		cl, err := c.app.client()
		if err != nil {
			return err
		}
		sb, err := cl.Sandboxes.Create(ctx, req)
		if err != nil {
			return c.explain(err, req)
		}
		if !noWait {
			if sb, err = c.wait(ctx, cl, sb, timeout); err != nil {
				return err
			}
		}
		return printSandbox(c.app.stdout, sb, asJSON)
	}
}

// explain adds what to do next to a create error about the parent or the
// name, which the generic hints would misread as about the new sandbox.
func (c *sandboxCreate) explain(err error, req platinum.CreateSandboxRequest) error {
	var ae *platinum.APIError
	if !errors.As(err, &ae) || ae.Code != platinum.CodeConflict {
		return err
	}
	if st := ae.State(); st != "" && req.ParentID != "" {
		return withHint(err, fmt.Sprintf("the parent %s is %s; start it with `pt sandbox start %s --wait`, then create the child", req.ParentID, st, req.ParentID))
	}
	return nameConflictHint(err, req.Name)
}

// wait polls the sandbox until it runs, printing template build progress
// to stderr while it is creating.
func (c *sandboxCreate) wait(ctx context.Context, cl *platinum.Client, sb *platinum.Sandbox, timeout time.Duration) (*platinum.Sandbox, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p := progress{w: c.app.stderr, slug: sb.Template}
	for {
		switch sb.State {
		case platinum.StateRunning:
			return sb, nil
		case platinum.StateFailed, platinum.StateDeleting, platinum.StateDeleted:
			return nil, &platinum.StateError{ID: sb.ID, Want: platinum.StateRunning, Got: sb.State, Reason: sb.Reason}
		case platinum.StateCreating:
			// Progress is a nicety: a failed read must not fail the create.
			if t, err := cl.Templates.Get(wctx, sb.Template); err == nil {
				p.show(t)
			}
		}
		err := c.app.sleep(wctx)
		if err == nil {
			var next *platinum.Sandbox
			if next, err = cl.Sandboxes.Get(wctx, sb.ID); err == nil {
				sb = next
				continue
			}
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, withHint(
				fmt.Errorf("sandbox %s is still %s after %s", sb.ID, sb.State, timeout),
				fmt.Sprintf("it keeps starting in the background: check it with `pt sandbox get %s`, or wait longer with --timeout", sb.ID))
		}
		return nil, err
	}
}

// progress prints a template build's progress lines, each change once.
type progress struct {
	w    io.Writer
	slug string
	last string
}

func (p *progress) show(t *platinum.Template) {
	var line string
	switch t.Status {
	case platinum.TemplateBuilding:
		line = "building"
		if t.Progress != "" {
			line += ": " + t.Progress
		}
	case platinum.TemplateNotBuilt:
		line = "waiting for the build to start"
	case platinum.TemplateFailed:
		line = "build failed"
		if t.Error != "" {
			line += ": " + t.Error
		}
	case platinum.TemplateReady:
		if p.last == "" {
			return // nothing was being built: stay quiet
		}
		line = "ready"
		if t.VersionID != "" {
			line += " (" + t.VersionID + ", " + formatBytes(t.SizeBytes) + ")"
		}
	default:
		line = string(t.Status)
	}
	if line == p.last {
		return
	}
	p.last = line
	fmt.Fprintf(p.w, "template %s: %s\n", p.slug, line)
}
