package main

import (
	"context"
	"flag"
	"strconv"
	"strings"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sandboxPs is `pt sandbox ps ID`: the processes running in a sandbox.
type sandboxPs struct{ app *app }

const sandboxPsSynopsis = "pt sandbox ps ID [--json]"

// bind binds the flags; the returned run prints one row per running process,
// by pid.
func (c *sandboxPs) bind(fs *flag.FlagSet) runFunc {
	asJSON := jsonFlag(fs, `print {"processes": [...]} as JSON`)
	return callRun(c.app, oneSandboxID, func(ctx context.Context, cl *platinum.Client, pos []string) ([]platinum.Process, error) {
		sb, err := cl.Sandboxes.Connect(ctx, pos[0])
		if err != nil {
			return nil, err
		}
		return sb.Processes().List(ctx)
	}, func(list []platinum.Process) error {
		if *asJSON {
			return writeJSON(c.app.stdout, struct {
				Processes []platinum.Process `json:"processes"`
			}{list})
		}
		return writeTable(table(c.app.stdout), "PID\tTAG\tTTY\tCWD\tCOMMAND", list, func(p *platinum.Process) []string {
			tty := "-"
			if p.PTY {
				tty = "pty"
			}
			return []string{strconv.Itoa(p.PID), orDash(p.Tag), tty, orDash(p.Cwd), strings.Join(p.Cmd, " ")}
		})
	})
}

// sandboxKillProcess is `pt sandbox kill-process ID PID`: signal one of
// a sandbox's processes (and its process group).
type sandboxKillProcess struct{ app *app }

const sandboxKillProcessSynopsis = "pt sandbox kill-process ID PID [--signal SIGNAL]"

// bind binds the flags; the returned run sends the signal; like kill(1) the
// default is SIGTERM, and a name may drop its SIG prefix (--signal kill).
func (c *sandboxKillProcess) bind(fs *flag.FlagSet) runFunc {
	sig := fs.String("signal", "SIGTERM", "`SIGNAL` to send: SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGSTOP, SIGCONT, SIGTSTP")
	fs.StringVar(sig, "s", "SIGTERM", "short for --signal")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		usage := in.usage
		if len(pos) != 2 {
			return usageErr(usage, "want a sandbox ID and a PID")
		}
		pid, err := strconv.Atoi(pos[1])
		if err != nil || pid <= 0 {
			return usageErr(usage, "PID %q is not a positive number (see pt sandbox ps %s)", pos[1], pos[0])
		}
		name := strings.ToUpper(*sig)
		if !strings.HasPrefix(name, "SIG") {
			name = "SIG" + name
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		sb, err := cl.Sandboxes.Connect(ctx, pos[0])
		if err != nil {
			return err
		}
		return sb.Processes().Signal(ctx, pid, name)
	}
}
