package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
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
	asJSON := jsonFlag(fs, "print the session as JSON")
	return callRun(c.app, noArgs, func(ctx context.Context, cl *platinum.Client, _ []string) (*platinum.Session, error) {
		ses, err := cl.Sessions.Create(ctx, platinum.SessionCreateRequest{SessionContext: cf.context(), Template: *tpl})
		if err != nil || *wait <= 0 || ses.Ready() {
			return ses, err
		}
		if ses, err = cl.Sessions.Wait(ctx, ses.SessionID, *wait); err != nil && ses != nil {
			printSession(c.app.stdout, ses, *asJSON)
		}
		return ses, err
	}, c.app.sessionPrinter(asJSON))
}

// sessionGet is `pt session get SESSION_ID`.
type sessionGet struct{ app *app }

const sessionGetSynopsis = "pt session get SESSION_ID [--json]"

// bind binds the flags; the returned run prints one session.
func (c *sessionGet) bind(fs *flag.FlagSet) runFunc {
	asJSON := jsonFlag(fs, "print the session as JSON")
	return callRun(c.app, exactArgs(1, sessionIDWant), func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Session, error) {
		return cl.Sessions.Get(ctx, pos[0])
	}, c.app.sessionPrinter(asJSON))
}

// sessionIDWant is the usage error of the verbs taking one session ID.
const sessionIDWant = "want exactly one session ID (ses_…)"

// sessionPrinter is the show of the verbs that print one session.
func (a *app) sessionPrinter(asJSON *bool) func(*platinum.Session) error {
	return func(s *platinum.Session) error { return printSession(a.stdout, s, *asJSON) }
}

// sessionStatus is `pt session status`: a passive lookup by context.
type sessionStatus struct{ app *app }

const sessionStatusSynopsis = "pt session status --vault ID (--workflow ID | --agent-session ID) [--json]"

// bind binds the flags; the returned run prints the context's session
// status; it never starts anything.
func (c *sessionStatus) bind(fs *flag.FlagSet) runFunc {
	cf := addContextFlags(fs)
	asJSON := jsonFlag(fs, "print the status as JSON")
	return callRun(c.app, noArgs, func(ctx context.Context, cl *platinum.Client, _ []string) (*platinum.Session, error) {
		return cl.Sessions.Status(ctx, cf.context())
	}, c.app.sessionPrinter(asJSON))
}

// sessionRm is `pt session rm SESSION_ID`.
type sessionRm struct{ app *app }

const sessionRmSynopsis = "pt session rm SESSION_ID [--wait DURATION] [--json]"

// bind binds the flags; the returned run stops a session: its workspace is
// saved, its sandbox disposed of.
func (c *sessionRm) bind(fs *flag.FlagSet) runFunc {
	wait := fs.Duration("wait", time.Minute, "wait up to this long for the session to be stopped (0: do not wait)")
	asJSON := jsonFlag(fs, "print the session as JSON")
	return callRun(c.app, exactArgs(1, sessionIDWant), func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Session, error) {
		return cl.Sessions.Stop(ctx, pos[0], *wait)
	}, c.app.sessionPrinter(asJSON))
}

const sessionListSynopsis = "pt session list [--all] [--json]"

// sessionList is `pt session list`: the org's live sessions (every one
// with --all).
func sessionList(a *app) verb {
	var all *bool
	return &listVerb[platinum.Session]{app: a, check: noArgs, header: "SESSION\tSTATUS\tVAULT\tCONTEXT\tTEMPLATE\tSANDBOX\tCREATED",
		flags: func(fs *flag.FlagSet) { all = fs.Bool("all", false, "include stopped and failed sessions") },
		list: func(ctx context.Context, cl *platinum.Client, _ []string) ([]platinum.Session, error) {
			return cl.Sessions.List(ctx, *all)
		},
		cells: func(s *platinum.Session) []string {
			return []string{s.SessionID, s.Status, s.VaultID, sessionContextLabel(s), s.Template, orDash(s.SandboxID), formatTime(s.CreatedAt)}
		}}
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

const poolListSynopsis = "pt pool list [--json]"

// poolList is `pt pool list`: every warm pool with its counts.
func poolList(a *app) verb {
	return listAll(a, "TEMPLATE\tRUNTIME\tMIN_READY\tMAX\tREADY\tPROVISIONING\tSOURCE\tAUTO\tTARGET",
		func(cl *platinum.Client) func(context.Context) ([]platinum.Pool, error) { return cl.Pools.List },
		func(p *platinum.Pool) []string {
			return []string{p.Template, p.Runtime, strconv.Itoa(p.MinReady), strconv.Itoa(p.Max), strconv.Itoa(p.Ready), strconv.Itoa(p.Provisioning), p.Source,
				strconv.FormatBool(p.Auto), strconv.Itoa(p.Target)}
		})
}

// poolSet is `pt pool set TEMPLATE`.
type poolSet struct{ app *app }

const poolSetSynopsis = "pt pool set TEMPLATE --min-ready N [--max M] [--runtime CLASS] [--auto] [--json]"

// bind binds the flags; the returned run configures a template's warm pool
// of one runtime class (platform admin token).
func (c *poolSet) bind(fs *flag.FlagSet) runFunc {
	minReady := fs.Int("min-ready", -1, "sandboxes to keep ready")
	class := fs.String("runtime", "", "the pool's runtime class, e.g. gvisor (default: the host's default class)")
	mx := fs.Int("max", -1, "most pooled sandboxes, ready or provisioning (default: --min-ready)")
	auto := fs.Bool("auto", false, "size the pool from recent demand between --min-ready and --max (docs/sessions.md, \"Demand-sized pools\")")
	asJSON := jsonFlag(fs, "print the pool as JSON")
	check := checks(exactArgs(1, "want exactly one template"), func(in *input) error {
		if *minReady < 0 {
			return in.usageErr("--min-ready is required")
		}
		if *mx < 0 {
			*mx = *minReady
		}
		if *auto && *mx <= *minReady {
			return in.usageErr("--auto needs a --max above --min-ready: the pool's target moves between them")
		}
		return nil
	})
	return callRun(c.app, check, func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Pool, error) {
		return cl.Pools.SetWith(ctx, pos[0], platinum.PoolSettings{Runtime: *class, MinReady: *minReady, Max: *mx, Auto: *auto})
	}, jsonOrLine(c.app, asJSON, func(p *platinum.Pool) string {
		if p.Auto {
			return fmt.Sprintf("pool %s (%s): auto, min_ready %d, max %d, target %d (%d ready, %d provisioning)", p.Template, p.Runtime, p.MinReady, p.Max, p.Target, p.Ready, p.Provisioning)
		}
		return fmt.Sprintf("pool %s (%s): min_ready %d, max %d (%d ready, %d provisioning)", p.Template, p.Runtime, p.MinReady, p.Max, p.Ready, p.Provisioning)
	}))
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
	check := func(in *input) error { return execArgs(in, "session", &req) }
	return callRun(c.app, check, func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.ExecResult, error) {
		return cl.Sessions.Exec(ctx, pos[0], req)
	}, func(res *platinum.ExecResult) error {
		io.WriteString(c.app.stdout, res.Stdout)
		io.WriteString(c.app.stderr, res.Stderr)
		return commandExit(res, "the command timed out and was killed")
	})
}
