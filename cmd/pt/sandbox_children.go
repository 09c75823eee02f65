package main

import (
	"context"
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
	asJSON := fs.Bool("json", false, `print {"rows": [...]} as JSON`)
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) != 1 {
			return in.usageErr("want exactly one sandbox ID")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		rows, err := cl.Sandboxes.Children(ctx, pos[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, struct {
				Rows []platinum.Sandbox `json:"rows"`
			}{rows})
		}
		_, err = io.WriteString(c.app.stdout, sandboxTable(rows, c.app.width()))
		return err
	}
}
