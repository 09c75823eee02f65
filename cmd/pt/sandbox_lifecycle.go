package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxLifecycle is `pt sandbox stop|pause|start|resume|archive ID`: one
// lifecycle call and, with --wait, a wait for the state it leads to,
// showing each state the sandbox passes through on stderr.
type sandboxLifecycle struct {
	app  *app
	verb string // stop, pause, start, resume or archive
}

// lifecycleVerbs describes each verb: what it leads to and what it is.
var lifecycleVerbs = map[string]struct {
	target platinum.State
	what   string
}{
	"stop":    {platinum.StateStopped, "stop a sandbox, keeping its disk (and memory, where it can)"},
	"pause":   {platinum.StateStopped, "same as stop"},
	"start":   {platinum.StateRunning, "start a stopped or archived sandbox"},
	"resume":  {platinum.StateRunning, "same as start"},
	"archive": {platinum.StateArchived, "move a stopped sandbox's disk to cold storage"},
}

// bind binds the flags; the returned run makes the call, optionally waits,
// and prints the outcome: the state (and for start, whether memory came
// back), or the sandbox with --json.
func (c *sandboxLifecycle) bind(fs *flag.FlagSet) runFunc {
	target := lifecycleVerbs[c.verb].target
	var (
		wait    bool
		timeout time.Duration
		asJSON  bool
	)
	fs.BoolVar(&wait, "wait", false, "wait until the sandbox is "+string(target)+", showing its progress")
	fs.DurationVar(&timeout, "timeout", 10*time.Minute, "how long --wait waits")
	fs.BoolVar(&asJSON, "json", false, "print the sandbox as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		usage := in.usage
		switch {
		case len(pos) != 1:
			return usageErr(usage, "want exactly one sandbox ID")
		case timeout <= 0:
			return usageErr(usage, "--timeout must be positive")
		}
		id := pos[0]
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		var opts []platinum.LifecycleOption
		wctx := ctx
		if wait {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
			opts = append(opts, waitFor(target, timeout), platinum.OnStateChange(func(sb *platinum.Sandbox) {
				line := progressState(sb.State)
				// A settled state may still carry the last progress it
				// made; only a state on its way reports it.
				if pct := sb.Progress.Percent(); pct >= 0 && transitional(sb.State) {
					line += fmt.Sprintf(" %s %d%% (%d of %d MB)", sb.Progress.Op, pct, sb.Progress.DoneBytes>>20, sb.Progress.TotalBytes>>20)
				}
				fmt.Fprintf(c.app.stderr, "sandbox %s: %s\n", id, line)
			}))
		}
		sb, err := c.call(cl)(wctx, id, opts...)
		if err != nil {
			return c.explain(ctx, err, id, sb, target, timeout)
		}
		if asJSON {
			return printSandbox(c.app.stdout, sb, true)
		}
		fmt.Fprintf(c.app.stdout, "sandbox %s: %s\n", id, sb.State)
		if sb.Restore != nil && target == platinum.StateRunning {
			fmt.Fprintln(c.app.stdout, restoredLine(*sb.Restore))
		}
		if !wait && transitional(sb.State) {
			fmt.Fprintf(c.app.stderr, "follow it with `pt sandbox get %s`, or run again with --wait\n", id)
		}
		return nil
	}
}

// call picks the SDK method for the verb.
func (c *sandboxLifecycle) call(cl *platinum.Client) func(context.Context, string, ...platinum.LifecycleOption) (*platinum.Sandbox, error) {
	s := cl.Sandboxes
	switch c.verb {
	case "pause":
		return s.Pause
	case "start":
		return s.Start
	case "resume":
		return s.Resume
	case "archive":
		return s.Archive
	}
	return s.Stop
}

func waitFor(target platinum.State, timeout time.Duration) platinum.WaitOption {
	switch target {
	case platinum.StateRunning:
		return platinum.WaitForRunning(timeout)
	case platinum.StateArchived:
		return platinum.WaitForArchived(timeout)
	}
	return platinum.WaitForStopped(timeout)
}

// restoredLine tells whether a start brought memory back, and what to do
// when it did not.
func restoredLine(r platinum.RestoreKind) string {
	if r == platinum.RestoreDiskOnly {
		return "restored: disk only — restart whatever the sandbox should be running"
	}
	return "restored: " + formatRestore(r)
}

// transitional reports whether a sandbox in state s is on its way to
// another state by itself.
func transitional(s platinum.State) bool {
	switch s {
	case platinum.StateCreating, platinum.StateStarting, platinum.StateStopping,
		platinum.StateArchiving, platinum.StateRestoring, platinum.StateDeleting:
		return true
	}
	return false
}

// progressState renders a state for progress lines: "archiving…" while
// on the way, "archived" once there.
func progressState(s platinum.State) string {
	if transitional(s) {
		return string(s) + "…"
	}
	return string(s)
}

// explain adds what to do next to a lifecycle error.
func (c *sandboxLifecycle) explain(ctx context.Context, err error, id string, sb *platinum.Sandbox, target platinum.State, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		state := "not " + string(target)
		if sb != nil {
			state = "still " + string(sb.State)
		}
		return withHint(fmt.Errorf("sandbox %s is %s after %s", id, state, timeout),
			fmt.Sprintf("it keeps going in the background: check it with `pt sandbox get %s`, or wait longer with --timeout", id))
	}
	var se *platinum.StateError
	if errors.As(err, &se) && se.Got != platinum.StateFailed && se.Got != platinum.StateDeleted && se.Got != platinum.StateDeleting {
		return withHint(err, fmt.Sprintf("see the sandbox with `pt sandbox get %s`; retry with `pt sandbox %s %s --wait`", id, c.verb, id))
	}
	var ae *platinum.APIError
	if !errors.As(err, &ae) || ae.Code != platinum.CodeConflict || ae.State() == "" {
		return err
	}
	st := ae.State()
	switch {
	case c.verb == "archive" && (st == platinum.StateRunning || st == platinum.StateFailed):
		return withHint(err, fmt.Sprintf("only a stopped sandbox can be archived: stop it first with `pt sandbox stop %s --wait`", id))
	case transitional(st):
		return withHint(err, fmt.Sprintf("the sandbox is %s; wait until it settles (`pt sandbox get %s`), then %s it", st, id, c.verb))
	}
	return withHint(err, fmt.Sprintf("the sandbox is %s; check it with `pt sandbox get %s`", st, id))
}
