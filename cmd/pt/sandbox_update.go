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
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		usage := in.usage
		switch {
		case len(pos) != 1:
			return usageErr(usage, "want exactly one sandbox ID")
		case name != "" && clearName:
			return usageErr(usage, "give --name or --clear-name, not both")
		case name == "" && !clearName && req.AutoResume == nil:
			return usageErr(usage, "nothing to change: give --auto-resume, --name or --clear-name")
		}
		if name != "" || clearName {
			req.Name = &name
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		sb, err := cl.Sandboxes.Update(ctx, pos[0], req)
		if err != nil {
			return nameConflictHint(err, name)
		}
		return printSandbox(c.app.stdout, sb, asJSON)
	}
}
