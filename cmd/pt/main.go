// Command pt is Platinum's command-line client: a thin layer over the Go SDK
// (github.com/platinum-dev/platinum/sdk/go) for creating sandboxes, running
// commands in them, copying files and managing templates. It talks to the
// ptd at PT_API_URL (default http://127.0.0.1:7070) with the token in
// PT_TOKEN.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one pt command line and returns the process exit code: 0 on
// success, 1 on errors, 2 on usage errors, and for `pt sandbox exec` the
// command's own exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{
		stdout:       stdout,
		stderr:       stderr,
		stdin:        os.Stdin,
		getenv:       os.Getenv,
		pollInterval: 500 * time.Millisecond,
		termWidth:    func() int { return terminalWidth(os.Stdout, os.Getenv) },
	}
	return a.run(ctx, args)
}

// app is what every verb shares: where output goes, where configuration
// comes from, and how often waits poll. Tests build their own.
type app struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	getenv         func(string) string
	pollInterval   time.Duration
	httpClient     *http.Client // nil: the SDK's default
	// termWidth is stdout's width in columns, 0 when it is not a terminal
	// (nil: not a terminal). Tables drop optional columns to fit it.
	termWidth func() int
}

// width returns stdout's terminal width, 0 when unknown.
func (a *app) width() int {
	if a.termWidth == nil {
		return 0
	}
	return a.termWidth()
}

// command is one verb: it parses its own args and does its job.
type command interface {
	Run(ctx context.Context, args []string) error
}

const topUsage = `pt is the Platinum command-line client.

usage: pt <command> [flags] [args]

commands:
  sandbox create -t TEMPLATE   create a sandbox and wait until it runs
  sandbox list                 list sandboxes (--parent ID, --roots, --metadata K=V)
  sandbox get ID               show one sandbox
  sandbox children ID          list a sandbox's children
  sandbox rm ID [ID...]        delete sandboxes
  sandbox rename ID NAME       rename a sandbox (--clear removes the name)
  sandbox update ID            turn auto-resume on or off (--auto-resume on|off)
  sandbox env ID K=V...        set environment variables (--unset K removes one)
  sandbox network ID           replace the network policy (--egress deny, --allow-out X, --deny-out CIDR)
  sandbox resize ID            change cpu, memory or disk (--cpu N --ram MB --disk GB)
  sandbox metrics ID           show live cpu, memory, disk and network figures
  sandbox usage ID             show billed usage (--from, --to)
  sandbox preview ID PORT      print a port's preview URLs and token (--expires 1h, --public, --revoke)
  sandbox stop ID [--wait]     stop a sandbox, keeping its disk (alias: pause)
  sandbox start ID [--wait]    start a stopped or archived sandbox (alias: resume)
  sandbox archive ID [--wait]  move a stopped sandbox's disk to cold storage
  sandbox snapshot ID          snapshot a sandbox (disk, and memory where it can; --memory on|off)
  sandbox restore ID SNAP      roll a sandbox back to a snapshot (--wait)
  sandbox fork ID -n N         make N running copies with their own identity (--wait)
  sandbox backup ID [--wait]   copy a sandbox's disk off-host (create --from-backup restores it)
  snapshot list|rm             list a sandbox's snapshots (--backups) or delete them
  sandbox exec ID -- CMD...    run a command in a sandbox
  sandbox shell ID [-- CMD...] open a terminal in a sandbox (exit code passed through)
  sandbox ps ID                list a sandbox's running processes
  sandbox kill-process ID PID  signal a process (--signal SIGTERM by default, SIGKILL, SIGINT...)
  sandbox run-code ID [FILE]   run Python/JavaScript/bash in a code-interpreter sandbox
  sandbox cp SRC DST           copy a file to or from a sandbox (ID:PATH)
  template list                list templates
  template build SLUG          build a new version of a template
  org create NAME              create an organization (admin token)
  org quota ORG_ID             show an org's quotas and usage; --max-sandboxes/--max-cpu/--max-ram-mb set them (platform admin)
  project list|create NAME     list projects or create one (org admin token)
  token create                 issue a token of your org (--project ID scopes it; --role member|admin)
  session create               start a context's session (--vault, --workflow | --agent-session)
  session status               look a context's session up without starting one
  session get|rm|list          show, stop (workspace kept) or list sessions
  session exec ID -- CMD...    run a command in a ready session
  pool list|set                show or configure warm pools (set: admin token)
  events [--follow]            print the org's events (--sandbox ID, --type T, --json); follow resumes after drops
  artifact create ID PATH      export a file or directory (as a tar) out of a sandbox; it outlives the sandbox
  artifact list|get|download|rm  list, show, download (-o FILE) or delete artifacts
  webhook create URL           send the org's events to URL, HMAC-signed (--event TYPE, --secret S)
  webhook list|get|rm|deliveries  list, show or delete webhooks, or show one's deliveries
  mcp                          serve MCP on stdin/stdout for AI agent hosts (--allow-delete-any)
  version                      print pt's version

environment:
  PT_API_URL   ptd's address (default http://127.0.0.1:7070)
  PT_TOKEN     API token (ptd prints the admin token on first start)

Run "pt <command> --help" for a command's flags.
`

// lookup finds the verb for args, returning the rest of args.
func (a *app) lookup(args []string) (command, []string, error) {
	if len(args) == 0 {
		return nil, nil, usageErr(topUsage, "no command given")
	}
	group, rest := args[0], args[1:]
	verb := ""
	if len(rest) > 0 {
		verb = rest[0]
	}
	var groups = map[string]map[string]command{
		"sandbox": {
			"create": &sandboxCreate{a}, "list": &sandboxList{a}, "ls": &sandboxList{a},
			"get": &sandboxGet{a}, "rm": &sandboxRm{a}, "delete": &sandboxRm{a},
			"kill": &sandboxKill{a}, "ttl": &sandboxTTL{a},
			"exec": &sandboxExec{a}, "shell": &sandboxShell{a}, "cp": &sandboxCp{a},
			"ps": &sandboxPs{a}, "kill-process": &sandboxKillProcess{a},
			"run-code": &sandboxRunCode{a},
			"rename":   &sandboxRename{a}, "update": &sandboxUpdate{a}, "env": &sandboxEnv{a}, "network": &sandboxNetwork{a},
			"children": &sandboxChildren{a}, "resize": &sandboxResize{a},
			"metrics": &sandboxMetrics{a}, "usage": &sandboxUsage{a}, "preview": &sandboxPreview{a},
			"snapshot": &sandboxSnapshot{a}, "restore": &sandboxRestore{a}, "fork": &sandboxFork{a},
			"backup": &sandboxBackup{a},
		},
		"template": {"list": &templateList{a}, "ls": &templateList{a}, "build": &templateBuild{a}, "versions": &templateVersions{a}},
		"org":      {"create": &orgCreate{a}, "quota": &orgQuota{a}},
		"project":  {"list": &projectList{a}, "ls": &projectList{a}, "create": &projectCreate{a}},
		"token":    {"create": &tokenCreate{a}},
		"session": {
			"create": &sessionCreate{a}, "get": &sessionGet{a}, "status": &sessionStatus{a},
			"rm": &sessionRm{a}, "stop": &sessionRm{a}, "list": &sessionList{a}, "ls": &sessionList{a},
			"exec": &sessionExec{a},
		},
		"pool":     {"list": &poolList{a}, "ls": &poolList{a}, "set": &poolSet{a}},
		"snapshot": {"list": &snapshotList{a}, "ls": &snapshotList{a}, "rm": &snapshotRm{a}, "delete": &snapshotRm{a}},
		"artifact": {
			"create": &artifactCreate{a}, "list": &artifactList{a}, "ls": &artifactList{a}, "get": &artifactGet{a},
			"download": &artifactDownload{a}, "rm": &artifactRm{a}, "delete": &artifactRm{a},
		},
		"webhook": {
			"create": &webhookCreate{a}, "list": &webhookList{a}, "ls": &webhookList{a}, "rm": &webhookRm{a},
			"delete": &webhookRm{a}, "deliveries": &webhookDeliveries{a}, "get": &webhookGet{a},
		},
	}
	for verb := range lifecycleVerbs {
		groups["sandbox"][verb] = &sandboxLifecycle{app: a, verb: verb}
	}
	aliases := map[string]string{"sandboxes": "sandbox", "sbx": "sandbox", "templates": "template", "orgs": "org", "sessions": "session", "pools": "pool", "snapshots": "snapshot", "snap": "snapshot"}
	if g, ok := aliases[group]; ok {
		group = g
	}
	switch group {
	case "version", "--version":
		return &versionCmd{a}, rest, nil
	case "events", "event":
		return &eventsCmd{a}, rest, nil
	case "mcp":
		return &mcpCmd{a}, rest, nil
	case "artifacts":
		group = "artifact"
	case "webhooks":
		group = "webhook"
	case "help", "-h", "-help", "--help":
		return nil, nil, errHelp(topUsage)
	}
	verbs, ok := groups[group]
	if !ok {
		return nil, nil, usageErr(topUsage, "unknown command %q", group)
	}
	if verb == "" || verb == "help" || verb == "-h" || verb == "--help" {
		return nil, nil, usageErr(topUsage, "pt %s needs a subcommand", group)
	}
	cmd, ok := verbs[verb]
	if !ok {
		return nil, nil, usageErr(topUsage, "unknown command \"%s %s\"", group, verb)
	}
	return cmd, rest[1:], nil
}

func (a *app) run(ctx context.Context, args []string) int {
	cmd, rest, err := a.lookup(args)
	if err == nil {
		err = cmd.Run(ctx, rest)
	}
	return a.report(ctx, err)
}

// report prints err the way every verb does (pt: message, then a hint)
// and returns the exit code for it.
func (a *app) report(ctx context.Context, err error) int {
	if err == nil {
		return 0
	}
	var (
		he *helpError
		ue *usageError
		ee *exitError
	)
	switch {
	case errors.As(err, &he):
		fmt.Fprint(a.stdout, he.usage)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(a.stderr, "pt: %s\n\n%s", ue.msg, ue.usage)
		return 2
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintf(a.stderr, "pt: %s\n", ee.msg)
		}
		return ee.code
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		fmt.Fprintln(a.stderr, "pt: interrupted")
		return 130
	}
	fmt.Fprintf(a.stderr, "pt: %s\n", message(err))
	if h := a.hint(err); h != "" {
		fmt.Fprintf(a.stderr, "hint: %s\n", h)
	}
	if id := requestID(err); id != "" {
		fmt.Fprintf(a.stderr, "request id: %s (ptd's logs name it; quote it when reporting this)\n", id)
	}
	return 1
}

// client builds the SDK client from PT_API_URL and PT_TOKEN.
func (a *app) client() (*platinum.Client, error) {
	base := a.getenv("PT_API_URL")
	if base == "" {
		base = platinum.DefaultBaseURL
	}
	if err := platinum.CheckBaseURL(base); err != nil {
		return nil, withHint(err, "set PT_API_URL to ptd's address, e.g. "+platinum.DefaultBaseURL)
	}
	token := a.getenv("PT_TOKEN")
	if token == "" {
		return nil, platinum.ErrNoToken
	}
	opts := []platinum.Option{
		platinum.WithUserAgent("pt/" + version()),
		platinum.WithPollInterval(a.pollInterval),
	}
	if a.httpClient != nil {
		opts = append(opts, platinum.WithHTTPClient(a.httpClient))
	}
	return platinum.New(base, token, opts...), nil
}

// sleep waits one poll interval or until ctx is done.
func (a *app) sleep(ctx context.Context) error {
	t := time.NewTimer(a.pollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
