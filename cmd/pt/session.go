package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// sessionContextFlags are the flags naming a session's owning context.
type sessionContextFlags struct {
	vault, workflow, agentSession *string
}

func addContextFlags(fs interface {
	String(name, value, usage string) *string
}) sessionContextFlags {
	return sessionContextFlags{
		vault:        fs.String("vault", "", "vault ID of the owning context (required)"),
		workflow:     fs.String("workflow", "", "workflow ID of the owning context"),
		agentSession: fs.String("agent-session", "", "agent-session ID of the owning context (instead of --workflow)"),
	}
}

func (f sessionContextFlags) context() platinum.SessionContext {
	return platinum.SessionContext{VaultID: *f.vault, WorkflowID: *f.workflow, AgentSessionID: *f.agentSession}
}

// sessionCreate is `pt session create`.
type sessionCreate struct{ app *app }

const sessionCreateSynopsis = "pt session create --vault ID (--workflow ID | --agent-session ID) [--template SLUG] [--wait DURATION] [--json]"

// bind binds the flags; the returned run starts (or returns) the context's
// session; with --wait it waits for readiness and fails unless the session
// becomes ready in time.
func (c *sessionCreate) bind(fs *flag.FlagSet) runFunc {
	cf := addContextFlags(fs)
	tpl := fs.String("template", "", "template (default: the server's session template)")
	wait := fs.Duration("wait", 0, "wait up to this long for the session to be ready (e.g. 2m)")
	asJSON := fs.Bool("json", false, "print the session as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) > 0 {
			return in.usageErr("unexpected argument %q", pos[0])
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		ses, err := cl.Sessions.Create(ctx, platinum.SessionCreateRequest{SessionContext: cf.context(), Template: *tpl})
		if err != nil {
			return err
		}
		if *wait > 0 && !ses.Ready() {
			if ses, err = cl.Sessions.Wait(ctx, ses.SessionID, *wait); err != nil {
				if ses != nil {
					printSession(c.app.stdout, ses, *asJSON)
				}
				return err
			}
		}
		return printSession(c.app.stdout, ses, *asJSON)
	}
}

// sessionGet is `pt session get SESSION_ID`.
type sessionGet struct{ app *app }

const sessionGetSynopsis = "pt session get SESSION_ID [--json]"

// bind binds the flags; the returned run prints one session.
func (c *sessionGet) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print the session as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) != 1 {
			return in.usageErr("want exactly one session ID (ses_…)")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		ses, err := cl.Sessions.Get(ctx, pos[0])
		if err != nil {
			return err
		}
		return printSession(c.app.stdout, ses, *asJSON)
	}
}

// sessionStatus is `pt session status`: a passive lookup by context.
type sessionStatus struct{ app *app }

const sessionStatusSynopsis = "pt session status --vault ID (--workflow ID | --agent-session ID) [--json]"

// bind binds the flags; the returned run prints the context's session
// status; it never starts anything.
func (c *sessionStatus) bind(fs *flag.FlagSet) runFunc {
	cf := addContextFlags(fs)
	asJSON := fs.Bool("json", false, "print the status as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) > 0 {
			return in.usageErr("unexpected argument %q", pos[0])
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		ses, err := cl.Sessions.Status(ctx, cf.context())
		if err != nil {
			return err
		}
		return printSession(c.app.stdout, ses, *asJSON)
	}
}

// sessionRm is `pt session rm SESSION_ID`.
type sessionRm struct{ app *app }

const sessionRmSynopsis = "pt session rm SESSION_ID [--wait DURATION] [--json]"

// bind binds the flags; the returned run stops a session: its workspace is
// saved, its sandbox disposed of.
func (c *sessionRm) bind(fs *flag.FlagSet) runFunc {
	wait := fs.Duration("wait", time.Minute, "wait up to this long for the session to be stopped (0: do not wait)")
	asJSON := fs.Bool("json", false, "print the session as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) != 1 {
			return in.usageErr("want exactly one session ID (ses_…)")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		ses, err := cl.Sessions.Stop(ctx, pos[0], *wait)
		if err != nil {
			return err
		}
		return printSession(c.app.stdout, ses, *asJSON)
	}
}

// sessionList is `pt session list`.
type sessionList struct{ app *app }

const sessionListSynopsis = "pt session list [--all] [--json]"

// bind binds the flags; the returned run lists the org's live sessions
// (every one with --all).
func (c *sessionList) bind(fs *flag.FlagSet) runFunc {
	all := fs.Bool("all", false, "include stopped and failed sessions")
	asJSON := fs.Bool("json", false, `print {"rows": [...]} as JSON`)
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) > 0 {
			return in.usageErr("unexpected argument %q", pos[0])
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		rows, err := cl.Sessions.List(ctx, *all)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, struct {
				Rows []platinum.Session `json:"rows"`
			}{rows})
		}
		tw := table(c.app.stdout)
		fmt.Fprintln(tw, "SESSION\tSTATUS\tVAULT\tCONTEXT\tTEMPLATE\tSANDBOX\tCREATED")
		for _, s := range rows {
			fmt.Fprintln(tw, strings.Join([]string{s.SessionID, s.Status, s.VaultID, sessionContextLabel(&s),
				s.Template, orDash(s.SandboxID), formatTime(s.CreatedAt)}, "\t"))
		}
		return tw.Flush()
	}
}

func sessionContextLabel(s *platinum.Session) string {
	if s.WorkflowID != "" {
		return "workflow:" + s.WorkflowID
	}
	return "agent_session:" + s.AgentSessionID
}

// printSession shows one session, as JSON or as a field list.
func printSession(w io.Writer, s *platinum.Session, asJSON bool) error {
	if asJSON {
		return writeJSON(w, s)
	}
	tw := table(w)
	field := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	field("Session", orDash(s.SessionID))
	field("Status", s.Status)
	if s.Reason != "" {
		field("Reason", s.Reason)
	}
	field("Vault", s.VaultID)
	field("Context", sessionContextLabel(s))
	if s.SessionID == "" {
		return tw.Flush()
	}
	field("Template", s.Template)
	field("Sandbox", orDash(s.SandboxID))
	field("Warm", fmt.Sprint(s.Warm))
	field("Workspace", s.Workspace.Name+" at "+s.Workspace.Path)
	field("Created", formatTime(s.CreatedAt))
	if s.ReadyAt != nil {
		field("Ready", formatTime(*s.ReadyAt))
	}
	if s.EndedAt != nil {
		field("Ended", formatTime(*s.EndedAt))
	}
	return tw.Flush()
}

// poolList is `pt pool list`.
type poolList struct{ app *app }

const poolListSynopsis = "pt pool list [--json]"

// bind binds the flags; the returned run prints every warm pool with its
// counts.
func (c *poolList) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, `print {"rows": [...]} as JSON`)
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) > 0 {
			return in.usageErr("unexpected argument %q", pos[0])
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		rows, err := cl.Pools.List(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, struct {
				Rows []platinum.Pool `json:"rows"`
			}{rows})
		}
		tw := table(c.app.stdout)
		fmt.Fprintln(tw, "TEMPLATE\tMIN_READY\tMAX\tREADY\tPROVISIONING\tSOURCE")
		for _, p := range rows {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", p.Template, p.MinReady, p.Max, p.Ready, p.Provisioning, p.Source)
		}
		return tw.Flush()
	}
}

// poolSet is `pt pool set TEMPLATE`.
type poolSet struct{ app *app }

const poolSetSynopsis = "pt pool set TEMPLATE --min-ready N [--max M] [--json]"

// bind binds the flags; the returned run configures a template's warm pool
// (platform admin token).
func (c *poolSet) bind(fs *flag.FlagSet) runFunc {
	minReady := fs.Int("min-ready", -1, "sandboxes to keep ready")
	mx := fs.Int("max", -1, "most pooled sandboxes, ready or provisioning (default: --min-ready)")
	asJSON := fs.Bool("json", false, "print the pool as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) != 1 {
			return in.usageErr("want exactly one template")
		}
		if *minReady < 0 {
			return in.usageErr("--min-ready is required")
		}
		if *mx < 0 {
			*mx = *minReady
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		p, err := cl.Pools.Set(ctx, pos[0], *minReady, *mx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, p)
		}
		fmt.Fprintf(c.app.stdout, "pool %s: min_ready %d, max %d (%d ready, %d provisioning)\n", p.Template, p.MinReady, p.Max, p.Ready, p.Provisioning)
		return nil
	}
}

// sessionExec is `pt session exec SESSION_ID -- CMD ARGS...`.
type sessionExec struct{ app *app }

const sessionExecSynopsis = "pt session exec SESSION_ID [--cwd DIR] [--timeout D] -- CMD [ARGS...]\n       pt session exec SESSION_ID [flags] --shell 'SHELL COMMAND'"

// bind binds the flags; the returned run runs a command in a ready session,
// prints its output and exits with its exit code; a session that is not
// ready is an error (not_ready).
func (c *sessionExec) bind(fs *flag.FlagSet) runFunc {
	var req platinum.ExecRequest
	fs.StringVar(&req.Cwd, "cwd", "", "working `DIR`ectory")
	fs.DurationVar(&req.Timeout, "timeout", 0, "kill the command after this long (default: ptd's)")
	fs.StringVar(&req.Shell, "shell", "", "run `COMMAND` with /bin/sh -c instead of an argv")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		usage := in.usage
		switch {
		case len(pos) == 0:
			return usageErr(usage, "want a session ID and a command")
		case len(pos) == 1 && req.Shell == "":
			return usageErr(usage, "no command given: put it after --, e.g. pt session exec %s -- ls -la", pos[0])
		case len(pos) > 1 && req.Shell != "":
			return usageErr(usage, "give either --shell or a command after --, not both")
		}
		if len(pos) > 1 {
			req.Cmd = pos[1:]
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		res, err := cl.Sessions.Exec(ctx, pos[0], req)
		if err != nil {
			return err
		}
		io.WriteString(c.app.stdout, res.Stdout)
		io.WriteString(c.app.stderr, res.Stderr)
		switch {
		case res.TimedOut:
			return &exitError{code: exitTimedOut, msg: "the command timed out and was killed"}
		case res.ExitCode < 0:
			return &exitError{code: exitSignaled, msg: "the command was killed by a signal"}
		case res.ExitCode != 0:
			return &exitError{code: min(res.ExitCode, 255)}
		}
		return nil
	}
}
