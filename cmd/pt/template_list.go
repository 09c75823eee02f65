package main

import (
	"context"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

const templateListSynopsis = "pt template list [--json]"

// templateList is `pt template list`: the templates, with their build
// status.
func templateList(a *app) verb {
	return listAll(a, "SLUG\tSTATUS\tVERSION\tSIZE\tCREATED\tDETAIL",
		func(cl *platinum.Client) func(context.Context) ([]platinum.Template, error) { return cl.Templates.List },
		func(t *platinum.Template) []string {
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
