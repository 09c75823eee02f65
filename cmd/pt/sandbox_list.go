package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxList is `pt sandbox list`: one page of sandboxes, newest first.
type sandboxList struct{ app *app }

const sandboxListSynopsis = "pt sandbox list [--state STATE] [--parent ID | --roots] [--project PRJ_ID] [--metadata K=V]... [--limit N] [--offset N] [--json]"

// bind binds the flags; the returned run lists sandboxes as a table, or as
// the API's JSON page with --json.
func (c *sandboxList) bind(fs *flag.FlagSet) runFunc {
	var (
		state  string
		opts   platinum.ListOptions
		md     = kvFlag{}
		asJSON bool
	)
	fs.StringVar(&state, "state", "", "only sandboxes in `STATE` (e.g. running, stopped, failed)")
	fs.StringVar(&opts.ParentID, "parent", "", "only the children of sandbox `ID`")
	fs.StringVar(&opts.ProjectID, "project", "", "only sandboxes of project `PRJ_ID`")
	fs.BoolVar(&opts.RootsOnly, "roots", false, "only top-level sandboxes (those without a parent)")
	fs.Var(includeFlag{&opts.Include}, "include", "also list `KINDS` left out by default: destroyed, failed (comma-separated)")
	fs.Var(md, "metadata", "only sandboxes whose metadata has `K=V` (repeatable; all must match)")
	fs.IntVar(&opts.Limit, "limit", 0, "at most `N` sandboxes, 1..200 (default 50)")
	fs.IntVar(&opts.Offset, "offset", 0, "skip the first `N` sandboxes")
	fs.BoolVar(&asJSON, "json", false, `print {"rows": [...], "total": N} as JSON`)
	check := func(in *input) error {
		switch {
		case len(in.pos) > 0:
			return noArgs(in)
		case opts.ParentID != "" && opts.RootsOnly:
			return in.usageErr("give --parent or --roots, not both")
		}
		opts.State, opts.Metadata = platinum.State(state), md.orNil()
		return nil
	}
	return callRun(c.app, check, func(ctx context.Context, cl *platinum.Client, _ []string) (*platinum.SandboxList, error) {
		return cl.Sandboxes.List(ctx, opts)
	}, jsonOr(c.app, &asJSON, func(l *platinum.SandboxList) error {
		if _, err := io.WriteString(c.app.stdout, sandboxTable(l.Rows, c.app.width())); err != nil {
			return err
		}
		if shown := opts.Offset + len(l.Rows); len(l.Rows) > 0 && shown < l.Total {
			fmt.Fprintf(c.app.stderr, "showing %d-%d of %d; see more with --offset %d\n", opts.Offset+1, shown, l.Total, shown)
		}
		return nil
	}))
}
