package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxExec is `pt sandbox exec ID -- CMD ARGS...`: run a command in a
// sandbox, streaming its output live, and exit with its exit code.
type sandboxExec struct{ app *app }

const sandboxExecSynopsis = "pt sandbox exec ID [--env K=V]... [--cwd DIR] [--timeout D] [--stdin] -- CMD [ARGS...]\n       pt sandbox exec ID [flags] --shell 'SHELL COMMAND'"

// Exit codes pt uses for a command that did not exit on its own.
const (
	exitTimedOut = 124 // as timeout(1)
	exitSignaled = 137 // 128+SIGKILL, the usual way such commands die
)

// bind binds the flags; the returned run runs the command. A command that
// exits non-zero makes pt exit with the same code; only problems reaching
// the sandbox print "pt: ...".
func (c *sandboxExec) bind(fs *flag.FlagSet) runFunc {
	var (
		req   platinum.ExecRequest
		env   = kvFlag{}
		stdin bool
	)
	fs.Var(env, "env", "environment variable `K=V` for the command (repeatable)")
	fs.StringVar(&req.Cwd, "cwd", "", "working `DIR`ectory")
	fs.DurationVar(&req.Timeout, "timeout", 0, "kill the command after this long (default: ptd's)")
	fs.StringVar(&req.Shell, "shell", "", "run `COMMAND` with /bin/sh -c instead of an argv")
	fs.BoolVar(&stdin, "stdin", false, "send pt's standard input to the command")
	fs.BoolVar(&stdin, "i", false, "short for --stdin")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		usage := in.usage
		switch {
		case len(pos) == 0:
			return usageErr(usage, "want a sandbox ID and a command")
		case len(pos) == 1 && req.Shell == "":
			return usageErr(usage, "no command given: put it after --, e.g. pt sandbox exec %s -- ls -la", pos[0])
		case len(pos) > 1 && req.Shell != "":
			return usageErr(usage, "give either --shell or a command after --, not both")
		case req.Timeout < 0:
			return usageErr(usage, "--timeout must be positive")
		}
		id := pos[0]
		req.Cmd = pos[1:]
		if len(req.Cmd) == 0 {
			req.Cmd = nil
		}
		req.Env = env.orNil()
		if stdin {
			b, err := io.ReadAll(c.app.stdin)
			if err != nil {
				return fmt.Errorf("read stdin: %w", err)
			}
			req.Stdin = string(b)
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		res, err := cl.Sandboxes.ExecStream(ctx, id, req, c.app.stdout, c.app.stderr)
		if err != nil {
			return err
		}
		switch {
		case res.TimedOut:
			msg := "the command timed out and was killed"
			if req.Timeout > 0 {
				msg = fmt.Sprintf("the command timed out after %s and was killed; raise --timeout", req.Timeout.Round(time.Millisecond))
			}
			return &exitError{code: exitTimedOut, msg: msg}
		case res.ExitCode < 0:
			return &exitError{code: exitSignaled, msg: "the command was killed by a signal"}
		case res.ExitCode != 0:
			return &exitError{code: min(res.ExitCode, 255)}
		}
		return nil
	}
}
