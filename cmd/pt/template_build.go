package main

import (
	"context"
	"fmt"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// templateBuild is `pt template build SLUG`: start a new version's build,
// e.g. to have pt-base ready before the first sandbox needs it.
type templateBuild struct{ app *app }

const templateBuildSynopsis = "pt template build SLUG [--wait]"

// Run starts the build; with --wait it follows the build's progress on
// stderr until it is ready, and fails if the build fails.
func (c *templateBuild) Run(ctx context.Context, args []string) error {
	fs := newFlags("pt template build")
	wait := fs.Bool("wait", false, "wait for the build, printing its progress")
	pos, err := parseArgs(fs, templateBuildSynopsis, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr(usageText(fs, templateBuildSynopsis), "want exactly one template SLUG")
	}
	slug := pos[0]
	cl, err := c.app.client()
	if err != nil {
		return err
	}
	t, err := cl.Templates.Build(ctx, slug)
	if err != nil {
		return err
	}
	if !*wait {
		fmt.Fprintf(c.app.stdout, "template %s: %s\n", slug, t.Status)
		fmt.Fprintf(c.app.stderr, "follow it with `pt template list`, or run again with --wait\n")
		return nil
	}
	p := progress{w: c.app.stderr, slug: slug}
	for {
		p.show(t)
		switch t.Status {
		case platinum.TemplateReady:
			fmt.Fprintf(c.app.stdout, "template %s: ready %s\n", slug, t.VersionID)
			return nil
		case platinum.TemplateFailed:
			return withHint(fmt.Errorf("template %s: build failed: %s", slug, t.Error),
				"ptd's log has the build output; retry with `pt template build "+slug+" --wait`")
		}
		if err := c.app.sleep(ctx); err != nil {
			return err
		}
		if t, err = cl.Templates.Get(ctx, slug); err != nil {
			return err
		}
	}
}
