package main

import (
	"context"
	"flag"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// templateList is `pt template list`.
type templateList struct{ app *app }

const templateListSynopsis = "pt template list [--json]"

// bind binds the flags; the returned run prints the templates as a table, or
// {"rows": [...]} with --json.
func (c *templateList) bind(fs *flag.FlagSet) runFunc {
	asJSON := jsonFlag(fs, rowsJSONUsage)
	return listRun(c.app, asJSON, noArgs, func(ctx context.Context, cl *platinum.Client, _ []string) ([]platinum.Template, error) {
		return cl.Templates.List(ctx)
	}, "SLUG\tSTATUS\tVERSION\tSIZE\tCREATED\tDETAIL", func(t *platinum.Template) []string {
		size := "-"
		if t.SizeBytes > 0 {
			size = formatBytes(t.SizeBytes)
		}
		detail := t.Progress
		if t.Status == platinum.TemplateFailed {
			detail = t.Error
		}
		return []string{t.Slug, string(t.Status), orDash(t.VersionID), size, formatTime(t.CreatedAt), orDash(detail)}
	})
}
