package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// templateList is `pt template list`.
type templateList struct{ app *app }

const templateListSynopsis = "pt template list [--json]"

// bind binds the flags; the returned run prints the templates as a table, or
// {"rows": [...]} with --json.
func (c *templateList) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, `print {"rows": [...]} as JSON`)
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) > 0 {
			return in.usageErr("unexpected argument %q", pos[0])
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		rows, err := cl.Templates.List(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, struct {
				Rows []platinum.Template `json:"rows"`
			}{rows})
		}
		tw := table(c.app.stdout)
		fmt.Fprintln(tw, "SLUG\tSTATUS\tVERSION\tSIZE\tCREATED\tDETAIL")
		for _, t := range rows {
			size := "-"
			if t.SizeBytes > 0 {
				size = formatBytes(t.SizeBytes)
			}
			detail := t.Progress
			if t.Status == platinum.TemplateFailed {
				detail = t.Error
			}
			fmt.Fprintln(tw, strings.Join([]string{t.Slug, string(t.Status), orDash(t.VersionID), size, formatTime(t.CreatedAt), orDash(detail)}, "\t"))
		}
		return tw.Flush()
	}
}
