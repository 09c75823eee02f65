package main

import (
	"flag"
	"io"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxChildren is `pt sandbox children ID`: the sandboxes created with
// ID as their parent, newest first.
type sandboxChildren struct{ app *app }

const sandboxChildrenSynopsis = "pt sandbox children ID [--json]"

// bind binds the flags; the returned run lists the children as `pt sandbox
// list` does.
func (c *sandboxChildren) bind(fs *flag.FlagSet) runFunc {
	asJSON := jsonFlag(fs, rowsJSONUsage)
	return callRun(c.app, oneSandboxID, onSandbox((*platinum.SandboxesService).Children), func(rows []platinum.Sandbox) error {
		if *asJSON {
			return writeRows(c.app.stdout, rows)
		}
		_, err := io.WriteString(c.app.stdout, sandboxTable(rows, c.app.width()))
		return err
	})
}
