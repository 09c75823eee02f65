package main

import "context"

// sandboxGet is `pt sandbox get ID`.
type sandboxGet struct{ app *app }

const sandboxGetSynopsis = "pt sandbox get ID [--json]"

// Run prints one sandbox.
func (c *sandboxGet) Run(ctx context.Context, args []string) error {
	fs := newFlags("pt sandbox get")
	asJSON := fs.Bool("json", false, "print the sandbox as JSON")
	pos, err := parseArgs(fs, sandboxGetSynopsis, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr(usageText(fs, sandboxGetSynopsis), "want exactly one sandbox ID")
	}
	cl, err := c.app.client()
	if err != nil {
		return err
	}
	sb, err := cl.Sandboxes.Get(ctx, pos[0])
	if err != nil {
		return err
	}
	return printSandbox(c.app.stdout, sb, *asJSON)
}
