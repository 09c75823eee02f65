package main

import (
	"context"
	"io"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxChildren is `pt sandbox children ID`: the sandboxes created with
// ID as their parent, newest first.
type sandboxChildren struct{ app *app }

const sandboxChildrenSynopsis = "pt sandbox children ID [--json]"

// Run lists the children as `pt sandbox list` does.
func (c *sandboxChildren) Run(ctx context.Context, args []string) error {
	fs := newFlags("pt sandbox children")
	asJSON := fs.Bool("json", false, `print {"rows": [...]} as JSON`)
	pos, err := parseArgs(fs, sandboxChildrenSynopsis, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr(usageText(fs, sandboxChildrenSynopsis), "want exactly one sandbox ID")
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
