package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
)

// spec is one pt command, defined once. The table below drives dispatch,
// flag parsing, usage errors, `pt help`, `pt completion` and docs/cli.md,
// so a command cannot exist without appearing in all of them.
type spec struct {
	// path is the words after pt: "sandbox create".
	path string
	// aliases are other spellings of path's last word ("ls" for "list").
	aliases []string
	// args is what follows path in pt help's list: "-t TEMPLATE".
	args string
	// short is the command's line in pt help.
	short string
	// synopsis is the usage line (more lines for other forms), then
	// optionally a blank line and a paragraph.
	synopsis string
	// examples are complete command lines, at least one.
	examples []string
	// verb makes the command's implementation.
	verb func(a *app) verb
}

// verb is a command's implementation: bind declares its flags on fs and
// returns the function that runs it once the flags are parsed.
type verb interface {
	bind(fs *flag.FlagSet) runFunc
}

// runFunc runs a command with what the dispatcher parsed.
type runFunc func(ctx context.Context, in *input) error

// input is a command line after flag parsing.
type input struct {
	// pos are the positional arguments, flags removed, those after "--"
	// included.
	pos []string
	// usage is the command's usage text (synopsis and flags).
	usage string
}

// usageErr is a usage error that prints the command's usage.
func (in *input) usageErr(format string, args ...any) error {
	return usageErr(in.usage, format, args...)
}

// groupAliases are other spellings of a command's first word.
var groupAliases = map[string]string{
	"sandboxes": "sandbox", "sbx": "sandbox", "templates": "template", "orgs": "org", "sessions": "session",
	"pools": "pool", "hosts": "host", "snapshots": "snapshot", "snap": "snapshot", "artifacts": "artifact", "webhooks": "webhook",
	"event": "events", "--version": "version", "-h": "help", "-help": "help", "--help": "help",
}

// commands is every pt command, in the order pt help lists them.
var commands = []spec{
	{path: "sandbox create", args: "-t TEMPLATE", short: "create a sandbox and wait until it runs", synopsis: sandboxCreateSynopsis,
		examples: []string{"pt sandbox create -t pt-base --cpu 2 --ram 1024", "pt sandbox create -t python-node --ttl 10m --metadata run=nightly --json",
			"pt sandbox create --from-backup bkp_01K…"},
		verb: func(a *app) verb { return &sandboxCreate{a} }},
	{path: "sandbox list", aliases: []string{"ls"}, short: "list sandboxes (--parent ID, --roots, --metadata K=V)", synopsis: sandboxListSynopsis,
		examples: []string{"pt sandbox list --state running --limit 100", "pt sandbox list --roots --metadata team=a"},
		verb:     func(a *app) verb { return &sandboxList{a} }},
	{path: "sandbox get", args: "ID", short: "show one sandbox", synopsis: sandboxGetSynopsis,
		examples: []string{"pt sandbox get sbx_01K…", "pt sandbox get sbx_01K… --json"},
		verb:     func(a *app) verb { return &sandboxGet{a} }},
	{path: "sandbox children", args: "ID", short: "list a sandbox's children", synopsis: sandboxChildrenSynopsis,
		examples: []string{"pt sandbox children sbx_01K…"},
		verb:     func(a *app) verb { return &sandboxChildren{a} }},
	{path: "sandbox rm", aliases: []string{"delete"}, args: "ID [ID...]", short: "delete sandboxes", synopsis: sandboxRmSynopsis,
		examples: []string{"pt sandbox rm sbx_01K…", "pt sandbox rm sbx_01K…child sbx_01K…parent"},
		verb:     func(a *app) verb { return &sandboxRm{a} }},
	{path: "sandbox kill", args: "ID [ID...]", short: "destroy sandboxes; killing one already gone is not an error", synopsis: sandboxKillSynopsis,
		examples: []string{"pt sandbox kill sbx_01K…"},
		verb:     func(a *app) verb { return &sandboxKill{a} }},
	{path: "sandbox ttl", args: "ID DURATION", short: "give a sandbox a new lifetime from now (up to 24h since creation)", synopsis: sandboxTTLSynopsis,
		examples: []string{"pt sandbox ttl sbx_01K… 30m", "pt sandbox ttl sbx_01K… 2h --json"},
		verb:     func(a *app) verb { return &sandboxTTL{a} }},
	{path: "sandbox rename", args: "ID NAME", short: "rename a sandbox (--clear removes the name)", synopsis: sandboxRenameSynopsis,
		examples: []string{"pt sandbox rename sbx_01K… ci-runner-2", "pt sandbox rename sbx_01K… --clear"},
		verb:     func(a *app) verb { return &sandboxRename{a} }},
	{path: "sandbox update", args: "ID", short: "turn auto-resume on or off (--auto-resume on|off)", synopsis: sandboxUpdateSynopsis,
		examples: []string{"pt sandbox update sbx_01K… --auto-resume off"},
		verb:     func(a *app) verb { return &sandboxUpdate{a} }},
	{path: "sandbox env", args: "ID K=V...", short: "set environment variables (--unset K removes one)", synopsis: sandboxEnvSynopsis,
		examples: []string{"pt sandbox env sbx_01K… API_TOKEN=new-value --unset OLD_UNUSED"},
		verb:     func(a *app) verb { return &sandboxEnv{a} }},
	{path: "sandbox network", args: "ID", short: "replace the network policy (--egress deny, --allow-out X, --deny-out CIDR)", synopsis: sandboxNetworkSynopsis,
		examples: []string{"pt sandbox network sbx_01K… --egress deny --allow-out api.github.com --allow-out '*.pypi.org'", "pt sandbox network sbx_01K…"},
		verb:     func(a *app) verb { return &sandboxNetwork{a} }},
	{path: "sandbox resize", args: "ID", short: "change cpu, memory or disk (--cpu N --ram MB --disk GB)", synopsis: sandboxResizeSynopsis,
		examples: []string{"pt sandbox resize sbx_01K… --cpu 4 --ram 8192 --disk 8"},
		verb:     func(a *app) verb { return &sandboxResize{a} }},
	{path: "sandbox metrics", args: "ID", short: "show live cpu, memory, disk and network figures", synopsis: sandboxMetricsSynopsis,
		examples: []string{"pt sandbox metrics sbx_01K…"},
		verb:     func(a *app) verb { return &sandboxMetrics{a} }},
	{path: "sandbox usage", args: "ID", short: "show billed usage (--from, --to)", synopsis: sandboxUsageSynopsis,
		examples: []string{"pt sandbox usage sbx_01K… --from 2026-11-29 --to 2026-11-30"},
		verb:     func(a *app) verb { return &sandboxUsage{a} }},
	{path: "sandbox preview", args: "ID PORT", short: "print a port's preview URLs and token (--expires 1h, --public, --revoke)", synopsis: sandboxPreviewSynopsis,
		examples: []string{"pt sandbox preview sbx_01K… 8080 --expires 1h", "pt sandbox preview sbx_01K… 8080 --revoke"},
		verb:     func(a *app) verb { return &sandboxPreview{a} }},
	lifecycle("stop", "ID [--wait]", "stop a sandbox, keeping its disk (and memory, where it can)"),
	lifecycle("pause", "ID [--wait]", "same as stop"),
	lifecycle("start", "ID [--wait]", "start a stopped or archived sandbox"),
	lifecycle("resume", "ID [--wait]", "same as start"),
	lifecycle("archive", "ID [--wait]", "move a stopped sandbox's disk to cold storage"),
	{path: "sandbox snapshot", args: "ID", short: "snapshot a sandbox (disk, and memory where it can; --memory on|off)", synopsis: sandboxSnapshotSynopsis,
		examples: []string{"pt sandbox snapshot sbx_01K… --name before-upgrade"},
		verb:     func(a *app) verb { return &sandboxSnapshot{a} }},
	{path: "sandbox restore", args: "ID SNAP", short: "roll a sandbox back to a snapshot (--wait)", synopsis: sandboxRestoreSynopsis,
		examples: []string{"pt sandbox restore sbx_01K… snap_01K… --wait"},
		verb:     func(a *app) verb { return &sandboxRestore{a} }},
	{path: "sandbox fork", args: "ID -n N", short: "make N running copies with their own identity (--wait)", synopsis: sandboxForkSynopsis,
		examples: []string{"pt sandbox fork sbx_01K… -n 2 --wait"},
		verb:     func(a *app) verb { return &sandboxFork{a} }},
	{path: "sandbox backup", args: "ID [--wait]", short: "copy a sandbox's disk off-host (create --from-backup restores it)", synopsis: sandboxBackupSynopsis,
		examples: []string{"pt sandbox backup sbx_01K… --wait"},
		verb:     func(a *app) verb { return &sandboxBackup{a} }},
	{path: "sandbox exec", args: "ID -- CMD...", short: "run a command in a sandbox", synopsis: sandboxExecSynopsis,
		examples: []string{"pt sandbox exec sbx_01K… -- uname -a", "pt sandbox exec sbx_01K… --cwd /tmp --shell 'ls | wc -l'"},
		verb:     func(a *app) verb { return &sandboxExec{a} }},
	{path: "sandbox shell", args: "ID [-- CMD...]", short: "open a terminal in a sandbox (exit code passed through)", synopsis: sandboxShellSynopsis,
		examples: []string{"pt sandbox shell sbx_01K…", "pt sandbox shell sbx_01K… -- top"},
		verb:     func(a *app) verb { return &sandboxShell{a} }},
	{path: "sandbox ps", args: "ID", short: "list a sandbox's running processes", synopsis: sandboxPsSynopsis,
		examples: []string{"pt sandbox ps sbx_01K…"},
		verb:     func(a *app) verb { return &sandboxPs{a} }},
	{path: "sandbox kill-process", args: "ID PID", short: "signal a process (--signal SIGTERM by default, SIGKILL, SIGINT...)", synopsis: sandboxKillProcessSynopsis,
		examples: []string{"pt sandbox kill-process sbx_01K… 42 --signal SIGKILL"},
		verb:     func(a *app) verb { return &sandboxKillProcess{a} }},
	{path: "sandbox run-code", args: "ID [FILE]", short: "run Python/JavaScript/TypeScript/bash in a code-interpreter sandbox", synopsis: sandboxRunCodeSynopsis,
		examples: []string{"pt sandbox run-code sbx_01K… analysis.py", "echo 'console.log(1+1)' | pt sandbox run-code sbx_01K… --language javascript -"},
		verb:     func(a *app) verb { return &sandboxRunCode{a} }},
	{path: "sandbox cp", args: "SRC DST", short: "copy a file to or from a sandbox (ID:PATH)", synopsis: sandboxCpSynopsis,
		examples: []string{"pt sandbox cp ./notes.txt sbx_01K…:/root/notes.txt", "pt sandbox cp sbx_01K…:/root/notes.txt -"},
		verb:     func(a *app) verb { return &sandboxCp{a} }},
	{path: "snapshot list", aliases: []string{"ls"}, args: "SANDBOX_ID", short: "list a sandbox's snapshots (--backups for its backups)", synopsis: snapshotListSynopsis,
		examples: []string{"pt snapshot list sbx_01K…", "pt snapshot list sbx_01K… --backups"},
		verb:     func(a *app) verb { return &snapshotList{a} }},
	{path: "snapshot rm", aliases: []string{"delete"}, args: "SNAP_ID...", short: "delete snapshots or backups", synopsis: snapshotRmSynopsis,
		examples: []string{"pt snapshot rm snap_01K…"},
		verb:     func(a *app) verb { return &snapshotRm{a} }},
	{path: "template list", aliases: []string{"ls"}, short: "list templates", synopsis: templateListSynopsis,
		examples: []string{"pt template list"},
		verb:     templateList},
	{path: "template build", args: "SLUG -f Dockerfile [DIR]", short: "build the org's template from a Dockerfile (or rebuild a platform template)", synopsis: templateBuildSynopsis,
		examples: []string{"pt template build myapp -f Dockerfile .", "pt template build myapp -f docker/Dockerfile --build-arg VERSION=2 --no-cache --json ./src", "pt template build pt-base --wait"},
		verb:     func(a *app) verb { return &templateBuild{app: a} }},
	{path: "template create", args: "SLUG --from-image REF", short: "build the org's template from an image", synopsis: templateCreateSynopsis,
		examples: []string{"pt template create web --from-image ghcr.io/acme/web:1.4", "pt template create api --from-image registry.example.com/api@sha256:… --start-cmd 'api serve' --ready-cmd 'wget -qO- localhost:8080/health' --snapshot --runtime gvisor"},
		verb:     func(a *app) verb { return &templateCreate{app: a} }},
	{path: "template import", args: "SLUG TARBALL", short: "build the org's template from an image tarball (docker save, OCI layout)", synopsis: templateImportSynopsis,
		examples: []string{"docker save acme/web:1.4 | pt template import web -"},
		verb:     func(a *app) verb { return &templateImport{app: a} }},
	{path: "template rm", aliases: []string{"delete"}, args: "SLUG[@VERSION]", short: "delete the org's template or one of its versions", synopsis: templateRmSynopsis,
		examples: []string{"pt template rm web", "pt template rm web@2"},
		verb:     func(a *app) verb { return &templateRm{a} }},
	{path: "registry login", args: "REGISTRY", short: "store the org's credentials for an image registry", synopsis: registryLoginSynopsis,
		examples: []string{"echo \"$GHCR_TOKEN\" | pt registry login ghcr.io --username acme-bot --password-stdin"},
		verb:     func(a *app) verb { return &registryLogin{app: a} }},
	{path: "registry list", aliases: []string{"ls"}, short: "list the registries the org stored credentials for", synopsis: registryListSynopsis,
		examples: []string{"pt registry list"},
		verb:     func(a *app) verb { return &registryList{a} }},
	{path: "registry logout", args: "REGISTRY", short: "forget the org's credentials for a registry", synopsis: registryLogoutSynopsis,
		examples: []string{"pt registry logout ghcr.io"},
		verb:     func(a *app) verb { return &registryLogout{a} }},
	{path: "template versions", args: "SLUG", short: "list a template's versions (pin one with create --template-version)", synopsis: templateVersionsSynopsis,
		examples: []string{"pt template versions python-node"},
		verb:     func(a *app) verb { return &templateVersions{a} }},
	{path: "org create", args: "NAME", short: "create an organization (admin token)", synopsis: orgCreateSynopsis,
		examples: []string{"pt org create acme"},
		verb:     func(a *app) verb { return &orgCreate{a} }},
	{path: "org quota", args: "ORG_ID", short: "show an org's quotas and usage; --max-sandboxes/--max-cpu/--max-ram-mb set them (platform admin)", synopsis: orgQuotaSynopsis,
		examples: []string{"pt org quota org_01K…", "pt org quota org_01K… --max-sandboxes 10 --max-cpu 16"},
		verb:     func(a *app) verb { return &orgQuota{a} }},
	{path: "project list", aliases: []string{"ls"}, short: "list projects", synopsis: projectListSynopsis,
		examples: []string{"pt project list"},
		verb:     projectList},
	{path: "project create", args: "NAME", short: "create a project (org admin token)", synopsis: projectCreateSynopsis,
		examples: []string{"pt project create ci"},
		verb:     func(a *app) verb { return &projectCreate{a} }},
	{path: "token create", short: "issue a token of your org (--project ID scopes it; --role member|admin)", synopsis: tokenCreateSynopsis,
		examples: []string{"pt token create --project prj_01K…", "pt token create --role admin --json"},
		verb:     func(a *app) verb { return &tokenCreate{a} }},
	{path: "session create", short: "start a context's session (--vault, --workflow | --agent-session)", synopsis: sessionCreateSynopsis,
		examples: []string{"pt session create --vault vault-1 --workflow wf-42 --wait 2m"},
		verb:     func(a *app) verb { return &sessionCreate{a} }},
	{path: "session status", short: "look a context's session up without starting one", synopsis: sessionStatusSynopsis,
		examples: []string{"pt session status --vault vault-1 --workflow wf-42"},
		verb:     func(a *app) verb { return &sessionStatus{a} }},
	{path: "session get", args: "SESSION_ID", short: "show a session", synopsis: sessionGetSynopsis,
		examples: []string{"pt session get ses_01K…"},
		verb:     func(a *app) verb { return &sessionGet{a} }},
	{path: "session list", aliases: []string{"ls"}, short: "list the org's live sessions (--all for ended ones too)", synopsis: sessionListSynopsis,
		examples: []string{"pt session list --all"},
		verb:     sessionList},
	{path: "session rm", aliases: []string{"stop"}, args: "SESSION_ID", short: "stop a session (its workspace is kept)", synopsis: sessionRmSynopsis,
		examples: []string{"pt session rm ses_01K… --wait 1m"},
		verb:     func(a *app) verb { return &sessionRm{a} }},
	{path: "session exec", args: "ID -- CMD...", short: "run a command in a ready session", synopsis: sessionExecSynopsis,
		examples: []string{"pt session exec ses_01K… -- ls /workspace"},
		verb:     func(a *app) verb { return &sessionExec{a} }},
	{path: "pool list", aliases: []string{"ls"}, short: "show warm pools", synopsis: poolListSynopsis,
		examples: []string{"pt pool list"},
		verb:     poolList},
	{path: "pool set", args: "TEMPLATE", short: "configure a warm pool (admin token)", synopsis: poolSetSynopsis,
		examples: []string{"pt pool set busybox --min-ready 2 --max 4", "pt pool set busybox --runtime gvisor --min-ready 1", "pt pool set busybox --min-ready 0 --max 3 --auto"},
		verb:     func(a *app) verb { return &poolSet{a} }},
	{path: "host list", aliases: []string{"ls"}, short: "show hosts with their state, capacity and load", synopsis: hostListSynopsis,
		examples: []string{"pt host list", "pt host list --json"},
		verb:     hostList},
	{path: "host drain", args: "ID", short: "stop placing new sandboxes on a host (admin token)", synopsis: hostDrainSynopsis,
		examples: []string{"pt host drain host_01K…"},
		verb:     func(a *app) verb { return &hostDrain{app: a, drain: true} }},
	{path: "host undrain", args: "ID", short: "let a drained host take new sandboxes again (admin token)", synopsis: hostUndrainSynopsis,
		examples: []string{"pt host undrain host_01K…"},
		verb:     func(a *app) verb { return &hostDrain{app: a} }},
	{path: "events", args: "[--follow]", short: "print the org's events (--sandbox ID, --type T, --json); follow resumes after drops", synopsis: eventsSynopsis,
		examples: []string{"pt events --sandbox sbx_01K… --type state_changed", "pt events --follow --json"},
		verb:     func(a *app) verb { return &eventsCmd{a} }},
	{path: "artifact create", args: "ID PATH", short: "export a file or directory (as a tar) out of a sandbox; it outlives the sandbox", synopsis: artifactCreateSynopsis,
		examples: []string{"pt artifact create sbx_01K… /root/results --name results"},
		verb:     func(a *app) verb { return &artifactCreate{a} }},
	{path: "artifact list", aliases: []string{"ls"}, short: "list artifacts (--sandbox ID)", synopsis: artifactListSynopsis,
		examples: []string{"pt artifact list --sandbox sbx_01K…"},
		verb:     artifactList},
	{path: "artifact get", args: "ID", short: "show an artifact", synopsis: artifactGetSynopsis,
		examples: []string{"pt artifact get art_01K…"},
		verb:     func(a *app) verb { return &artifactGet{a} }},
	{path: "artifact download", args: "ID", short: "download an artifact (-o FILE, - for stdout), checking its hash", synopsis: artifactDownloadSynopsis,
		examples: []string{"pt artifact download art_01K… -o results.tar"},
		verb:     func(a *app) verb { return &artifactDownload{a} }},
	{path: "artifact rm", aliases: []string{"delete"}, args: "ID [ID...]", short: "delete artifacts", synopsis: artifactRmSynopsis,
		examples: []string{"pt artifact rm art_01K…"},
		verb:     func(a *app) verb { return &artifactRm{a} }},
	{path: "webhook create", args: "URL", short: "send the org's events to URL, HMAC-signed (--event TYPE, --secret S)", synopsis: webhookCreateSynopsis,
		examples: []string{"pt webhook create https://hooks.example.com/platinum --event state_changed"},
		verb:     func(a *app) verb { return &webhookCreate{a} }},
	{path: "webhook list", aliases: []string{"ls"}, short: "list webhooks", synopsis: webhookListSynopsis,
		examples: []string{"pt webhook list"},
		verb:     webhookList},
	{path: "webhook get", args: "ID", short: "show a webhook", synopsis: webhookGetSynopsis,
		examples: []string{"pt webhook get whk_01K…"},
		verb:     func(a *app) verb { return &webhookGet{a} }},
	{path: "webhook deliveries", args: "ID", short: "show a webhook's deliveries and their attempts", synopsis: webhookDeliveriesSynopsis,
		examples: []string{"pt webhook deliveries whk_01K…"},
		verb:     webhookDeliveries},
	{path: "webhook rm", aliases: []string{"delete"}, args: "ID [ID...]", short: "delete webhooks", synopsis: webhookRmSynopsis,
		examples: []string{"pt webhook rm whk_01K…"},
		verb:     func(a *app) verb { return &webhookRm{a} }},
	{path: "mcp", short: "serve MCP on stdin/stdout for AI agent hosts (--allow-delete-any)", synopsis: mcpSynopsis,
		examples: []string{"pt mcp"},
		verb:     func(a *app) verb { return &mcpCmd{a} }},
	{path: "completion", args: "bash|zsh|fish", short: "print a shell completion script", synopsis: completionSynopsis,
		examples: []string{"source <(pt completion bash)", "pt completion fish > ~/.config/fish/completions/pt.fish"},
		verb:     func(a *app) verb { return &completionCmd{a} }},
	{path: "help", args: "[COMMAND]", short: "show this list, or a command's usage, flags and examples", synopsis: helpSynopsis,
		examples: []string{"pt help sandbox create"},
		verb:     func(a *app) verb { return &helpCmd{a} }},
	{path: "version", short: "print pt's version", synopsis: "pt version",
		examples: []string{"pt version"},
		verb:     func(a *app) verb { return &versionCmd{a} }},
}

// lifecycle is the spec of one of the lifecycle verbs (sandbox_lifecycle.go).
func lifecycle(name, args, short string) spec {
	return spec{path: "sandbox " + name, args: args, short: short,
		synopsis: "pt sandbox " + name + " ID [--wait] [--timeout 10m] [--json]\n\n  " + lifecycleVerbs[name].what + ".",
		examples: []string{"pt sandbox " + name + " sbx_01K… --wait"},
		verb:     func(a *app) verb { return &sandboxLifecycle{app: a, verb: name} }}
}

// find returns the command args name and the rest of args. A group word
// alone, or an unknown word, is a usage error naming what was wrong.
func find(args []string) (*spec, []string, error) {
	if len(args) == 0 {
		return nil, nil, usageErr(topUsage(), "no command given")
	}
	group := args[0]
	if g, ok := groupAliases[group]; ok {
		group = g
	}
	if c := lookup(group); c != nil {
		return c, args[1:], nil
	}
	if !slices.ContainsFunc(commands, func(c spec) bool { return strings.HasPrefix(c.path, group+" ") }) {
		return nil, nil, usageErr(topUsage(), "unknown command %q", group)
	}
	if len(args) < 2 || slices.Contains([]string{"help", "-h", "-help", "--help"}, args[1]) {
		return nil, nil, usageErr(topUsage(), "pt %s needs a subcommand", group)
	}
	if c := lookup(group + " " + args[1]); c != nil {
		return c, args[2:], nil
	}
	return nil, nil, usageErr(topUsage(), "unknown command \"%s %s\"", group, args[1])
}

// lookup returns the command whose path (or an alias of its last word) is
// path, nil when none is.
func lookup(path string) *spec {
	for i := range commands {
		c := &commands[i]
		if c.path == path {
			return c
		}
		head, _ := splitPath(c.path)
		if slices.ContainsFunc(c.aliases, func(a string) bool { return head+a == path }) {
			return c
		}
	}
	return nil
}

// splitPath splits "sandbox create" into "sandbox " and "create".
func splitPath(path string) (head, last string) {
	i := strings.LastIndex(path, " ")
	return path[:i+1], path[i+1:]
}

// parse binds c's flags and parses args: the run to call and its input.
func (c *spec) parse(a *app, args []string) (runFunc, *input, error) {
	fs := newFlags("pt " + c.path)
	r := c.verb(a).bind(fs)
	usage := usageText(fs, c.synopsis)
	pos, err := parseArgs(fs, usage, c.help(usage), args)
	if err != nil {
		return nil, nil, err
	}
	return r, &input{pos: pos, usage: usage}, nil
}

// help is what `pt help PATH` and `pt PATH --help` print: the usage text,
// then the aliases and examples.
func (c *spec) help(usage string) string {
	var b strings.Builder
	b.WriteString(usage)
	if len(c.aliases) > 0 {
		head, _ := splitPath(c.path)
		b.WriteString("\naliases: pt " + head + strings.Join(c.aliases, ", pt "+head) + "\n")
	}
	b.WriteString("\nexamples:\n")
	for _, e := range c.examples {
		b.WriteString("  " + e + "\n")
	}
	return b.String()
}

// flagNames returns c's flags as users type them (-t, --template).
func (c *spec) flagNames() []string {
	fs := newFlags("pt " + c.path)
	c.verb(&app{}).bind(fs)
	var out []string
	fs.VisitAll(func(f *flag.Flag) {
		if len(f.Name) == 1 {
			out = append(out, "-"+f.Name)
		} else {
			out = append(out, "--"+f.Name)
		}
	})
	return out
}

// topUsage is pt help's text: every command of the table with its line.
func topUsage() string {
	var b strings.Builder
	b.WriteString("pt is the Platinum command-line client.\n\nusage: pt <command> [flags] [args]\n\ncommands:\n")
	width := 0
	for _, c := range commands {
		width = max(width, len(strings.TrimSpace(c.path+" "+c.args)))
	}
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, strings.TrimSpace(c.path+" "+c.args), c.short)
	}
	b.WriteString(`
environment:
  PT_API_URL   ptd's address (default http://127.0.0.1:7070)
  PT_TOKEN     API token (ptd prints the admin token on first start)

Run "pt help <command>" (or "pt <command> --help") for a command's flags and examples.
`)
	return b.String()
}

const helpSynopsis = "pt help [COMMAND]"

// helpCmd is `pt help [COMMAND]`.
type helpCmd struct{ app *app }

// bind takes no flags; the returned run prints pt's command list, or one
// command's usage, flags and examples.
func (c *helpCmd) bind(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, in *input) error {
		if len(in.pos) == 0 {
			return errHelp(topUsage())
		}
		cmd, _, err := find(in.pos)
		if err != nil {
			return err
		}
		_, _, err = cmd.parse(c.app, []string{"--help"})
		return err
	}
}
