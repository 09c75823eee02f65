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
	check := func(in *input) error {
		if err := execArgs(in, "sandbox", &req); err != nil {
			return err
		}
		if req.Timeout < 0 {
			return in.usageErr("--timeout must be positive")
		}
		req.Env = env.orNil()
		if stdin {
			b, err := io.ReadAll(c.app.stdin)
			if err != nil {
				return fmt.Errorf("read stdin: %w", err)
			}
			req.Stdin = string(b)
		}
		return nil
	}
	return callRun(c.app, check, func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.ExecResult, error) {
		return cl.Sandboxes.ExecStream(ctx, pos[0], req, c.app.stdout, c.app.stderr)
	}, func(res *platinum.ExecResult) error {
		msg := "the command timed out and was killed"
		if req.Timeout > 0 {
			msg = fmt.Sprintf("the command timed out after %s and was killed; raise --timeout", req.Timeout.Round(time.Millisecond))
		}
		return commandExit(res, msg)
	})
}

// execArgs checks the positional arguments of the exec verbs (what is
// "sandbox" or "session"): an ID, then a command after "--" or --shell,
// never both. It sets req.Cmd to the command.
func execArgs(in *input, what string, req *platinum.ExecRequest) error {
	switch pos := in.pos; {
	case len(pos) == 0:
		return in.usageErr("want a %s ID and a command", what)
	case len(pos) == 1 && req.Shell == "":
		return in.usageErr("no command given: put it after --, e.g. pt %s exec %s -- ls -la", what, pos[0])
	case len(pos) > 1 && req.Shell != "":
		return in.usageErr("give either --shell or a command after --, not both")
	case len(pos) > 1:
		req.Cmd = pos[1:]
	}
	return nil
}

// commandExit is pt's exit for a finished command: its own exit code, or
// exitTimedOut (with timedOut as the message) or exitSignaled for one that
// did not exit on its own.
func commandExit(res *platinum.ExecResult, timedOut string) error {
	switch {
	case res.TimedOut:
		return &exitError{code: exitTimedOut, msg: timedOut}
	case res.ExitCode < 0:
		return &exitError{code: exitSignaled, msg: "the command was killed by a signal"}
	case res.ExitCode != 0:
		return &exitError{code: min(res.ExitCode, 255)}
	}
	return nil
}
