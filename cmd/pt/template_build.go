package main

import (
	"context"
	"flag"
	"fmt"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// templateBuild is `pt template build SLUG -f Dockerfile [CONTEXT_DIR]`:
// build a version of the org's own template from a Dockerfile
// (template_custom.go). Without -f it starts a new build of a platform
// template, e.g. to have pt-base ready before the first sandbox needs it.
type templateBuild struct {
	app     *app
	file    string
	args    kvFlag
	noCache bool
	s       settingsFlags
}

const templateBuildSynopsis = "pt template build SLUG -f Dockerfile [CONTEXT_DIR] [--build-arg K=V] [--no-cache] [--json]\npt template build SLUG [--wait]\n\n" +
	"With -f (or a CONTEXT_DIR) it builds the org's own template from a Dockerfile: CONTEXT_DIR (default .) is packed\n" +
	"honouring its .dockerignore and uploaded, every RUN runs in a build sandbox, and unchanged steps come from the\n" +
	"layer cache. Without, it starts a new build of a platform template."

// bind binds the flags; the returned run starts the build; with --wait it
// follows the build's progress on stderr until it is ready, and fails if the
// build fails.
func (c *templateBuild) bind(fs *flag.FlagSet) runFunc {
	wait := fs.Bool("wait", false, "wait for a platform template's build, printing its progress")
	c.args = kvFlag{}
	fs.StringVar(&c.file, "f", "", "the Dockerfile (default CONTEXT_DIR/Dockerfile)")
	fs.Var(c.args, "build-arg", "value of a Dockerfile ARG, K=V (repeatable)")
	fs.BoolVar(&c.noCache, "no-cache", false, "run every step; do not reuse the layer cache")
	c.s.bind(fs)
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) == 0 {
			return in.usageErr("want exactly one template SLUG")
		}
		if c.file != "" || len(pos) > 1 {
			return c.app.dockerfileBuild(ctx, in, pos[0], c.file, c.args, c.noCache, &c.s)
		}
		if len(pos) != 1 {
			return in.usageErr("want exactly one template SLUG")
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
}
