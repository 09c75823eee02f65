package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/term"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// The org's own templates (docs/templates.md): pt template create (from an
// image), pt template build -f (a Dockerfile), pt template import (an image
// tarball), pt template rm, and pt registry for pull credentials.

// settingsFlags are the template settings every custom build takes.
type settingsFlags struct {
	startCmd, readyCmd, user, workdir, runtime string
	readyTimeout                               time.Duration
	cpu                                        float64
	ram, disk                                  int
	env                                        kvFlag
	snapshot, noWait, asJSON                   bool
}

func (s *settingsFlags) bind(fs *flag.FlagSet) {
	s.env = kvFlag{}
	fs.StringVar(&s.startCmd, "start-cmd", "", "command started in every new sandbox (run by /bin/sh -c; default: the image's ENTRYPOINT and CMD)")
	fs.StringVar(&s.readyCmd, "ready-cmd", "", "probe a create waits for (exit 0) before it reports running (run by /bin/sh -c)")
	fs.DurationVar(&s.readyTimeout, "ready-timeout", 0, "longest wait for --ready-cmd (0: the server's, 60s)")
	fs.Var(s.env, "env", "default environment KEY=VALUE (repeatable)")
	fs.StringVar(&s.user, "user", "", "user processes run as (name, uid, or either with :group)")
	fs.StringVar(&s.workdir, "workdir", "", "working directory of processes")
	fs.Float64Var(&s.cpu, "cpu", 0, "default vCPUs of sandboxes")
	fs.IntVar(&s.ram, "ram", 0, "default memory (MB) of sandboxes")
	fs.IntVar(&s.disk, "disk", 0, "default disk (GB) of sandboxes")
	fs.StringVar(&s.runtime, "runtime", "", "default runtime class (runc, gvisor)")
	fs.BoolVar(&s.snapshot, "snapshot", false, "snapshot the started sandbox (needs --ready-cmd; gvisor): creates restore it instead of booting")
	fs.BoolVar(&s.noWait, "no-wait", false, "start the build and print its ID without following it")
	fs.BoolVar(&s.asJSON, "json", false, "print the finished build as JSON (progress goes to stderr)")
}

// input renders the flags that were given as TemplateSettingsInput.
func (s *settingsFlags) input() *platinum.TemplateSettingsInput {
	in := &platinum.TemplateSettingsInput{Env: s.env.orNil(), User: s.user, Workdir: s.workdir, CPU: s.cpu,
		RAMMB: s.ram, DiskGB: s.disk, Runtime: s.runtime, ReadyTimeoutMs: int(s.readyTimeout.Milliseconds())}
	if s.startCmd != "" {
		in.StartCmd = []string{"/bin/sh", "-c", s.startCmd}
	}
	if s.readyCmd != "" {
		in.ReadyCmd = []string{"/bin/sh", "-c", s.readyCmd}
	}
	if in.Env == nil && in.User == "" && in.Workdir == "" && in.CPU == 0 && in.RAMMB == 0 && in.DiskGB == 0 &&
		in.Runtime == "" && in.ReadyTimeoutMs == 0 && in.StartCmd == nil && in.ReadyCmd == nil {
		return nil
	}
	return in
}

// runCustomBuild sends req and follows the build to its end, printing
// progress on stderr (a bar on a terminal, lines otherwise) and the
// result on stdout.
func (a *app) runCustomBuild(ctx context.Context, cl *platinum.Client, req platinum.CreateTemplateRequest, s *settingsFlags) error {
	req.Snapshot = s.snapshot
	req.Settings = s.input()
	b, err := cl.Templates.Create(ctx, req)
	if err != nil {
		return err
	}
	if s.noWait {
		if s.asJSON {
			return writeJSON(a.stdout, b)
		}
		fmt.Fprintf(a.stdout, "build %s of %s: %s\n", b.ID, b.Slug, b.Status)
		return nil
	}
	bar := newBuildBar(a.stderr)
	b, err = cl.Templates.Wait(ctx, req.Slug, b.ID, bar.line)
	bar.done()
	if err != nil {
		return err
	}
	if s.asJSON {
		if err := writeJSON(a.stdout, b); err != nil {
			return err
		}
	}
	if b.Status != platinum.BuildReady {
		msg := b.Error
		if f := b.Failure; f != nil {
			msg = fmt.Sprintf("step %d/%d (Dockerfile line %d: %s)", f.Step, f.Steps, f.Line, f.Instruction)
			if f.ExitCode != nil {
				msg += fmt.Sprintf(" exited with code %d", *f.ExitCode)
			}
		}
		return fmt.Errorf("template %s: build %s failed: %s", b.Slug, b.ID, msg)
	}
	if !s.asJSON {
		fmt.Fprintf(a.stdout, "template %s: version %d %s (%s)\n", b.Slug, b.Version, b.VersionID, bar.summary())
	}
	return nil
}

// buildBar shows a build's progress: on a terminal one line redrawn in
// place with a bar of steps (or of a layer's bytes), elsewhere one line
// per step, pull and failure, RUN output included.
type buildBar struct {
	w     io.Writer
	tty   bool
	start time.Time
	hits  int
	ran   int
	drawn bool
}

func newBuildBar(w io.Writer) *buildBar {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	return &buildBar{w: w, tty: tty, start: time.Now()}
}

func bar(done, total int64, width int) string {
	if total <= 0 {
		return strings.Repeat(" ", width)
	}
	n := int(done * int64(width) / total)
	n = min(max(n, 0), width)
	return strings.Repeat("=", n) + strings.Repeat(" ", width-n)
}

func (b *buildBar) draw(s string) {
	if b.tty {
		fmt.Fprintf(b.w, "\r\033[K%s", s)
		b.drawn = true
		return
	}
	fmt.Fprintln(b.w, s)
}

func (b *buildBar) clear() {
	if b.tty && b.drawn {
		fmt.Fprint(b.w, "\r\033[K")
		b.drawn = false
	}
}

func (b *buildBar) line(l platinum.BuildLogLine) {
	switch l.Type {
	case "step":
		b.draw(fmt.Sprintf("[%s] step %d/%d  %s", bar(int64(l.Step), int64(l.Steps), 20), l.Step, l.Steps, l.Instruction))
	case "cache":
		if l.Cached {
			b.hits++
		} else {
			b.ran++
		}
		if !b.tty {
			state := fmt.Sprintf("done in %dms", l.DurationMs)
			if l.Cached {
				state = "CACHED"
			}
			fmt.Fprintf(b.w, "  step %d/%d %s\n", l.Step, l.Steps, state)
		}
	case "pull":
		state := formatBytes(l.Bytes) + "/" + formatBytes(l.Total)
		if l.Cached {
			state = "stored already"
		}
		layer := strings.TrimPrefix(l.Layer, "sha256:")
		if len(layer) > 12 {
			layer = layer[:12]
		}
		if b.tty || l.Cached || l.Bytes >= l.Total {
			b.draw(fmt.Sprintf("[%s] layer %s %s", bar(l.Bytes, l.Total, 20), layer, state))
		}
	case "output":
		b.clear()
		fmt.Fprint(b.w, l.Text)
		if !strings.HasSuffix(l.Text, "\n") {
			fmt.Fprintln(b.w)
		}
	case "info":
		b.clear()
		fmt.Fprintln(b.w, l.Text)
	case "error":
		b.clear()
		fmt.Fprintln(b.w, "error: "+l.Text)
	}
}

func (b *buildBar) done() { b.clear() }

func (b *buildBar) summary() string {
	s := time.Since(b.start).Round(10 * time.Millisecond).String()
	if b.hits+b.ran > 0 {
		s += fmt.Sprintf(", %d steps from the cache, %d run", b.hits, b.ran)
	}
	return s
}

// templateCreate is `pt template create SLUG --from-image REF`.
type templateCreate struct {
	app   *app
	image string
	s     settingsFlags
}

const templateCreateSynopsis = "pt template create SLUG --from-image REF [--start-cmd CMD] [--ready-cmd CMD] [--snapshot] [--json]"

func (c *templateCreate) bind(fs *flag.FlagSet) runFunc {
	fs.StringVar(&c.image, "from-image", "", "image reference to build the template from (registry/repo:tag or @sha256:…)")
	c.s.bind(fs)
	return func(ctx context.Context, in *input) error {
		if len(in.pos) != 1 {
			return in.usageErr("want exactly one template SLUG")
		}
		if c.image == "" {
			return in.usageErr("--from-image is required (a Dockerfile builds with `pt template build SLUG -f Dockerfile`)")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		return c.app.runCustomBuild(ctx, cl, platinum.CreateTemplateRequest{Slug: in.pos[0], FromImage: c.image}, &c.s)
	}
}

// templateImport is `pt template import SLUG TARBALL`.
type templateImport struct {
	app *app
	s   settingsFlags
}

const templateImportSynopsis = "pt template import SLUG TARBALL [--json]\n\nTARBALL is `docker save` output or an OCI layout packed as a tar (- reads stdin)."

func (c *templateImport) bind(fs *flag.FlagSet) runFunc {
	c.s.bind(fs)
	return func(ctx context.Context, in *input) error {
		if len(in.pos) != 2 {
			return in.usageErr("want a template SLUG and an image TARBALL")
		}
		var r io.Reader = c.app.stdin
		if in.pos[1] != "-" {
			f, err := os.Open(in.pos[1])
			if err != nil {
				return err
			}
			defer f.Close()
			r = f
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		up, err := cl.Templates.UploadImage(ctx, r)
		if err != nil {
			return err
		}
		return c.app.runCustomBuild(ctx, cl, platinum.CreateTemplateRequest{Slug: in.pos[0], ImageUploadID: up.ID}, &c.s)
	}
}

// dockerfileBuild is pt template build SLUG -f Dockerfile [CONTEXT_DIR]:
// the context is packed honouring .dockerignore, uploaded, then built.
func (a *app) dockerfileBuild(ctx context.Context, in *input, slug, file string, args kvFlag, noCache bool, s *settingsFlags) error {
	dir := "."
	switch len(in.pos) {
	case 1:
	case 2:
		dir = in.pos[1]
	default:
		return in.usageErr("want a template SLUG and at most one CONTEXT_DIR")
	}
	if file == "" {
		file = filepath.Join(dir, "Dockerfile")
	}
	text, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("dockerfile: %w", err)
	}
	cl, err := a.client()
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	packed := make(chan int64, 1)
	go func() {
		n, err := platinum.PackContext(dir, pw)
		packed <- n
		pw.CloseWithError(err)
	}()
	up, err := cl.Templates.UploadContext(ctx, pr)
	pr.CloseWithError(errors.New("upload ended"))
	n := <-packed
	if err != nil {
		return err
	}
	if !s.asJSON {
		fmt.Fprintf(a.stderr, "build context %s: %s uploaded\n", dir, formatBytes(n))
	}
	req := platinum.CreateTemplateRequest{Slug: slug, Dockerfile: string(text), ContextUploadID: up.ID, BuildArgs: args.orNil(), NoCache: noCache}
	return a.runCustomBuild(ctx, cl, req, s)
}

// templateRm is `pt template rm SLUG[@VERSION]`.
type templateRm struct{ app *app }

const templateRmSynopsis = "pt template rm SLUG[@VERSION]...\n\nDeletes an org template (every version), or one version (SLUG@tplv_… or SLUG@N)."

func (c *templateRm) bind(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, in *input) error {
		if len(in.pos) == 0 {
			return in.usageErr("want at least one SLUG or SLUG@VERSION")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		for _, arg := range in.pos {
			slug, version, one := strings.Cut(arg, "@")
			if !one {
				ids, err := cl.Templates.Delete(ctx, slug)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.app.stdout, "deleted %s (%d versions)\n", slug, len(ids))
				continue
			}
			if !strings.HasPrefix(version, "tplv_") {
				vs, err := cl.Templates.Versions(ctx, slug)
				if err != nil {
					return err
				}
				found := ""
				for _, v := range vs {
					if fmt.Sprint(v.Version) == version {
						found = v.ID
					}
				}
				if found == "" {
					return fmt.Errorf("template %s has no version %s", slug, version)
				}
				version = found
			}
			if err := cl.Templates.DeleteVersion(ctx, slug, version); err != nil {
				return err
			}
			fmt.Fprintf(c.app.stdout, "deleted %s@%s\n", slug, version)
		}
		return nil
	}
}

// registryLogin is `pt registry login REGISTRY`.
type registryLogin struct {
	app                  *app
	username             string
	passwordStdin, token bool
}

const registryLoginSynopsis = "pt registry login REGISTRY --username USER --password-stdin\npt registry login REGISTRY --token-stdin"

func (c *registryLogin) bind(fs *flag.FlagSet) runFunc {
	fs.StringVar(&c.username, "username", "", "registry user name")
	fs.BoolVar(&c.passwordStdin, "password-stdin", false, "read the password from stdin")
	fs.BoolVar(&c.token, "token-stdin", false, "read a registry token from stdin")
	return func(ctx context.Context, in *input) error {
		if len(in.pos) != 1 {
			return in.usageErr("want exactly one REGISTRY (e.g. ghcr.io)")
		}
		if c.passwordStdin == c.token || (c.passwordStdin && c.username == "") {
			return in.usageErr("give --username with --password-stdin, or --token-stdin")
		}
		b, err := io.ReadAll(io.LimitReader(c.app.stdin, 64<<10))
		if err != nil {
			return err
		}
		secret := strings.TrimRight(string(b), "\r\n")
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		var cr *platinum.RegistryCredential
		if c.token {
			cr, err = cl.Templates.SetRegistryCredential(ctx, in.pos[0], "", "", secret)
		} else {
			cr, err = cl.Templates.SetRegistryCredential(ctx, in.pos[0], c.username, secret, "")
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(c.app.stdout, "credentials for %s stored (%s)\n", cr.Registry, cr.Kind)
		return nil
	}
}

// registryList is `pt registry list`.
type registryList struct{ app *app }

const registryListSynopsis = "pt registry list"

func (c *registryList) bind(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, in *input) error {
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		rows, err := cl.Templates.RegistryCredentials(ctx)
		if err != nil {
			return err
		}
		tw := table(c.app.stdout)
		fmt.Fprintln(tw, "REGISTRY\tKIND\tUSER\tUPDATED")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Registry, r.Kind, orDash(r.Username), formatTime(r.UpdatedAt))
		}
		return tw.Flush()
	}
}

// registryLogout is `pt registry logout REGISTRY`.
type registryLogout struct{ app *app }

const registryLogoutSynopsis = "pt registry logout REGISTRY"

func (c *registryLogout) bind(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, in *input) error {
		if len(in.pos) != 1 {
			return in.usageErr("want exactly one REGISTRY")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		if err := cl.Templates.DeleteRegistryCredential(ctx, in.pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(c.app.stdout, "credentials for %s forgotten\n", in.pos[0])
		return nil
	}
}
