package main

import (
	"context"
	"flag"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxGet is `pt sandbox get ID`.
type sandboxGet struct{ app *app }

const sandboxGetSynopsis = "pt sandbox get ID [--json]"

// bind binds the flags; the returned run prints one sandbox.
func (c *sandboxGet) bind(fs *flag.FlagSet) runFunc {
	asJSON := jsonFlag(fs, "print the sandbox as JSON")
	return callRun(c.app, oneSandboxID, func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Sandbox, error) {
		return cl.Sandboxes.Get(ctx, pos[0])
	}, func(sb *platinum.Sandbox) error { return printSandbox(c.app.stdout, sb, *asJSON) })
}
