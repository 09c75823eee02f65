package main

import (
	"context"
	"flag"
)

// sandboxGet is `pt sandbox get ID`.
type sandboxGet struct{ app *app }

const sandboxGetSynopsis = "pt sandbox get ID [--json]"

// bind binds the flags; the returned run prints one sandbox.
func (c *sandboxGet) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print the sandbox as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) != 1 {
			return in.usageErr("want exactly one sandbox ID")
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
}
