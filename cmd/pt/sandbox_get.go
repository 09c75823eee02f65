package main

import (
	"flag"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxGet is `pt sandbox get ID`.
type sandboxGet struct{ app *app }

const sandboxGetSynopsis = "pt sandbox get ID [--json]"

// bind binds the flags; the returned run prints one sandbox.
func (c *sandboxGet) bind(fs *flag.FlagSet) runFunc {
	asJSON := jsonFlag(fs, "print the sandbox as JSON")
	return callRun(c.app, oneSandboxID, onSandbox((*platinum.SandboxesService).Get),
		func(sb *platinum.Sandbox) error { return printSandbox(c.app.stdout, sb, *asJSON) })
}
