package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxRunCode is `pt sandbox run-code ID [FILE|-]`: run a cell in a
// code-interpreter sandbox (docs/code-interpreter.md), streaming stdout and
// stderr, printing the main result's text and saving images (PNG, JPEG,
// SVG) and PDFs to files.
type sandboxRunCode struct{ app *app }

const sandboxRunCodeSynopsis = "pt sandbox run-code ID [--language L] [--context CTX] [--timeout D] [--images DIR] [FILE|-]"

// savedFormats are the result formats run-code saves to files: the
// kernel sends images and PDFs base64, SVG as text.
var savedFormats = []struct {
	mime, ext string
	base64    bool
}{
	{"image/png", "png", true},
	{"image/jpeg", "jpg", true},
	{"image/svg+xml", "svg", false},
	{"application/pdf", "pdf", true},
}

// exitCellError is pt's exit code for a cell that raised an error.
const exitCellError = 1

// bind binds the flags; the returned run runs the cell. A cell that raises
// makes pt print the traceback and exit 1; only problems reaching the
// sandbox print "pt: ...".
func (c *sandboxRunCode) bind(fs *flag.FlagSet) runFunc {
	var req platinum.RunCodeRequest
	images := "."
	env := kvFlag{}
	fs.StringVar(&req.Language, "language", "", "python (default), javascript, typescript or bash")
	fs.StringVar(&req.ContextID, "context", "", "run in context `CTX` instead of the language's default")
	fs.DurationVar(&req.Timeout, "timeout", 0, "interrupt the cell after this long (the context survives)")
	fs.StringVar(&req.Cwd, "cwd", "", "working `DIR`ectory for this cell")
	fs.Var(env, "env", "environment variable `K=V` for this cell (repeatable)")
	fs.StringVar(&images, "images", images, "`DIR`ectory where image and PDF results are saved (result-N.png, .jpg, .svg, .pdf)")
	check := func(in *input) error {
		pos := in.pos
		switch {
		case len(pos) == 0:
			return in.usageErr("want a sandbox ID")
		case len(pos) > 2:
			return in.usageErr("want at most one FILE (or - for standard input)")
		case req.Timeout < 0:
			return in.usageErr("--timeout must be positive")
		}
		var src io.Reader = c.app.stdin
		if len(pos) == 2 && pos[1] != "-" {
			f, err := os.Open(pos[1])
			if err != nil {
				return err
			}
			defer f.Close()
			src = f
		}
		code, err := io.ReadAll(src)
		if err != nil {
			return fmt.Errorf("read code: %w", err)
		}
		req.Code, req.Env = string(code), env.orNil()
		req.OnStdout = func(s string) { io.WriteString(c.app.stdout, s) }
		req.OnStderr = func(s string) { io.WriteString(c.app.stderr, s) }
		return nil
	}
	return callRun(c.app, check, func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Execution, error) {
		return cl.Sandboxes.RunCode(ctx, pos[0], req)
	}, func(ex *platinum.Execution) error {
		if ex.KernelRestarted != "" {
			fmt.Fprintf(c.app.stderr, "pt: %s\n", ex.KernelRestarted)
		}
		n := 0
		for _, r := range ex.Results {
			for _, f := range savedFormats {
				if _, ok := r.Data[f.mime]; !ok {
					continue
				}
				var b []byte
				if f.base64 {
					if b = r.Binary(f.mime); b == nil {
						continue
					}
				} else {
					s, _ := r.Data[f.mime].(string)
					b = []byte(s)
				}
				n++
				path := filepath.Join(images, fmt.Sprintf("result-%d.%s", n, f.ext))
				if err := os.WriteFile(path, b, 0o644); err != nil {
					return err
				}
				fmt.Fprintf(c.app.stderr, "saved %s\n", path)
			}
			if r.IsMainResult && r.Text() != "" {
				fmt.Fprintln(c.app.stdout, r.Text())
			}
		}
		if ex.Error != nil {
			if ex.Error.Traceback != "" {
				fmt.Fprintln(c.app.stderr, ex.Error.Traceback)
			}
			return &exitError{code: exitCellError, msg: ex.Error.Error()}
		}
		return nil
	})
}
