package main

import (
	"context"
	"flag"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxUpdate is `pt sandbox update ID [--auto-resume on|off] [--name
// NAME | --clear-name]`: the CLI form of PATCH /v1/sandboxes/{id}, mainly
// for auto-resume, which has no verb of its own.
type sandboxUpdate struct{ app *app }

const sandboxUpdateSynopsis = "pt sandbox update ID [--auto-resume on|off] [--name NAME | --clear-name] [--json]"

// bind binds the flags; the returned run applies the changes and prints the
// sandbox.
func (c *sandboxUpdate) bind(fs *flag.FlagSet) runFunc {
	var (
		req       platinum.UpdateRequest
		name      string
		clearName bool
		asJSON    bool
	)
	fs.Var(onOffFlag{&req.AutoResume}, "auto-resume", "`on|off`: whether a preview-URL request starts the sandbox while it is stopped or archived")
	fs.StringVar(&name, "name", "", "rename the sandbox to `NAME`")
	fs.BoolVar(&clearName, "clear-name", false, "remove the sandbox's name")
	fs.BoolVar(&asJSON, "json", false, "print the sandbox as JSON")
	check := func(in *input) error {
		switch {
		case len(in.pos) != 1:
			return in.usageErr("want exactly one sandbox ID")
		case name != "" && clearName:
			return in.usageErr("give --name or --clear-name, not both")
		case name == "" && !clearName && req.AutoResume == nil:
			return in.usageErr("nothing to change: give --auto-resume, --name or --clear-name")
		}
		if name != "" || clearName {
			req.Name = &name
		}
		return nil
	}
	return callRun(c.app, check, func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Sandbox, error) {
		sb, err := cl.Sandboxes.Update(ctx, pos[0], req)
		if err != nil {
			return nil, nameConflictHint(err, name)
		}
		return sb, nil
	}, func(sb *platinum.Sandbox) error { return printSandbox(c.app.stdout, sb, asJSON) })
}
