package main

import (
	"context"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

const templateListSynopsis = "pt template list [--json]"

// templateList is `pt template list`: the templates, with their build
// status.
func templateList(a *app) verb {
	return &listVerb[platinum.Template]{app: a, check: noArgs, header: "SLUG\tSTATUS\tVERSION\tSIZE\tCREATED\tDETAIL",
		list: func(ctx context.Context, cl *platinum.Client, _ []string) ([]platinum.Template, error) {
			return cl.Templates.List(ctx)
		},
		cells: func(t *platinum.Template) []string {
			size := "-"
			if t.SizeBytes > 0 {
				size = formatBytes(t.SizeBytes)
			}
			detail := t.Progress
			if t.Status == platinum.TemplateFailed {
				detail = t.Error
			}
			return []string{t.Slug, string(t.Status), orDash(t.VersionID), size, formatTime(t.CreatedAt), orDash(detail)}
		}}
}
