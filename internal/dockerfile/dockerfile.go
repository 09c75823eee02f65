// Package dockerfile turns a Dockerfile into the plan a template build
// runs: parsed by BuildKit's own parser (moby/buildkit's
// frontend/dockerfile parser and instructions, the format's reference),
// checked against what Platinum builds (one stage; docs/templates.md lists
// the instructions), and expanded — ARG, ENV and build arguments
// substituted with BuildKit's shell lexer — into steps that each carry the
// whole state they run in (environment, user, working directory, shell).
// An instruction the builder does not support is an *Error naming its
// line, never skipped.
package dockerfile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// Error is a Dockerfile the builder cannot take. Line is 1-based (0 when
// the whole file is at fault).
type Error struct {
	Line int
	Msg  string
	// Unsupported is true for valid Dockerfile syntax Platinum does not
	// build (as opposed to a malformed file).
	Unsupported bool
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return "Dockerfile: " + e.Msg
	}
	return fmt.Sprintf("Dockerfile line %d: %s", e.Line, e.Msg)
}

// Unwrap makes an Error an invalid argument.
func (e *Error) Unwrap() error { return sandbox.ErrInvalidArgument }

func errAt(line int, format string, args ...any) *Error {
	return &Error{Line: line, Msg: fmt.Sprintf(format, args...)}
}

func unsupported(line int, format string, args ...any) *Error {
	return &Error{Line: line, Msg: fmt.Sprintf(format, args...), Unsupported: true}
}

// MaxSize caps a Dockerfile's length.
const MaxSize = 1 << 20

// File is a parsed, checked Dockerfile.
type File struct {
	// From is the FROM argument before expansion; FromLine its line.
	From     string
	FromLine int
	metaArgs []instructions.ArgCommand
	cmds     []located
	// SHA256 identifies the text.
	SHA256 string
}

type located struct {
	line int
	text string
	cmd  instructions.Command
}

// Parse parses and checks a Dockerfile: syntax, a single FROM, and only
// the instructions and flags the builder runs.
func Parse(text string) (*File, error) {
	if len(text) > MaxSize {
		return nil, errAt(0, "larger than %d bytes", MaxSize)
	}
	res, err := parser.Parse(strings.NewReader(text))
	if err != nil {
		return nil, fromParser(err)
	}
	sum := sha256.Sum256([]byte(text))
	f := &File{SHA256: hex.EncodeToString(sum[:])}
	lines := strings.Split(text, "\n")
	for _, n := range res.AST.Children {
		line := n.StartLine
		src := strings.TrimSpace(n.Original)
		if line >= 1 && line <= len(lines) && src == "" {
			src = strings.TrimSpace(lines[line-1])
		}
		v, err := instructions.ParseInstruction(n)
		if err != nil {
			return nil, errAt(line, "%s", cleanMsg(err))
		}
		switch c := v.(type) {
		case *instructions.Stage:
			if f.FromLine != 0 {
				return nil, unsupported(line, "a second FROM: multi-stage builds are not supported; build one stage")
			}
			if c.Platform != "" && c.Platform != "linux/amd64" {
				return nil, unsupported(line, "FROM --platform=%s: hosts run linux/amd64 only", c.Platform)
			}
			f.From, f.FromLine = c.BaseName, line
		case *instructions.ArgCommand:
			if f.FromLine == 0 {
				f.metaArgs = append(f.metaArgs, *c)
				continue
			}
			f.cmds = append(f.cmds, located{line, src, c})
		case instructions.Command:
			if f.FromLine == 0 {
				return nil, errAt(line, "%s before FROM: a Dockerfile starts with FROM (only ARG may come first)", strings.ToUpper(c.Name()))
			}
			if err := check(line, c); err != nil {
				return nil, err
			}
			f.cmds = append(f.cmds, located{line, src, c})
		default:
			return nil, errAt(line, "unexpected %T", v)
		}
	}
	if f.FromLine == 0 {
		return nil, errAt(0, "no FROM instruction")
	}
	return f, nil
}

// fromParser turns a parser error into an *Error with its line.
func fromParser(err error) *Error {
	var le *parser.LocationError
	if errors.As(err, &le) && len(le.Locations) > 0 && len(le.Locations[0]) > 0 {
		return errAt(le.Locations[0][0].Start.Line, "%s", cleanMsg(le.Unwrap()))
	}
	return errAt(0, "%s", cleanMsg(err))
}

// cleanMsg drops BuildKit's stack decorations from an error's message.
func cleanMsg(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "\n"); i > 0 {
		msg = msg[:i]
	}
	return msg
}

// check refuses what the builder does not run.
func check(line int, c instructions.Command) error {
	switch c := c.(type) {
	case *instructions.RunCommand:
		if len(c.FlagsUsed) > 0 {
			return unsupported(line, "RUN --%s is not supported", c.FlagsUsed[0])
		}
		if len(c.Files) > 0 {
			return unsupported(line, "heredocs are not supported; put the script in the build context and COPY it")
		}
	case *instructions.CopyCommand:
		switch {
		case c.From != "":
			return unsupported(line, "COPY --from: multi-stage builds are not supported")
		case c.Link:
			return unsupported(line, "COPY --link is not supported")
		case c.Parents:
			return unsupported(line, "COPY --parents is not supported")
		case len(c.ExcludePatterns) > 0:
			return unsupported(line, "COPY --exclude is not supported")
		case len(c.SourceContents) > 0:
			return unsupported(line, "heredocs are not supported")
		}
		return checkChmod(line, c.Chmod)
	case *instructions.AddCommand:
		switch {
		case c.Link:
			return unsupported(line, "ADD --link is not supported")
		case c.Checksum != "":
			return unsupported(line, "ADD --checksum is not supported (ADD takes local files only)")
		case c.KeepGitDir != nil:
			return unsupported(line, "ADD --keep-git-dir is not supported (ADD takes local files only)")
		case len(c.ExcludePatterns) > 0:
			return unsupported(line, "ADD --exclude is not supported")
		case len(c.SourceContents) > 0:
			return unsupported(line, "heredocs are not supported")
		}
		for _, s := range c.SourcePaths {
			if isURL(s) {
				return unsupported(line, "ADD of a URL (%s) is not supported: ADD takes files from the build context; fetch it with RUN", s)
			}
		}
		return checkChmod(line, c.Chmod)
	case *instructions.EnvCommand, *instructions.WorkdirCommand, *instructions.UserCommand, *instructions.LabelCommand,
		*instructions.ShellCommand, *instructions.ExposeCommand, *instructions.EntrypointCommand, *instructions.CmdCommand,
		*instructions.MaintainerCommand:
		if e, ok := c.(*instructions.EntrypointCommand); ok && len(e.Files) > 0 {
			return unsupported(line, "heredocs are not supported")
		}
		if e, ok := c.(*instructions.CmdCommand); ok && len(e.Files) > 0 {
			return unsupported(line, "heredocs are not supported")
		}
	default:
		return unsupported(line, "%s is not supported by Platinum's builder", strings.ToUpper(c.Name()))
	}
	return nil
}

func isURL(s string) bool {
	for _, p := range []string{"http://", "https://", "git@", "git://", "ssh://"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func checkChmod(line int, mode string) error {
	if mode == "" || strings.Contains(mode, "$") {
		return nil
	}
	if _, err := parseMode(mode); err != nil {
		return errAt(line, "--chmod=%s: %v", mode, err)
	}
	return nil
}

// parseMode reads an octal --chmod.
func parseMode(mode string) (uint32, error) {
	v, err := strconv.ParseUint(mode, 8, 32)
	if err != nil || v > 0o7777 {
		return 0, fmt.Errorf("want an octal mode such as 0755")
	}
	return uint32(v), nil
}

// Kind is a step's instruction.
type Kind string

// Step kinds.
const (
	Run        Kind = "RUN"
	Copy       Kind = "COPY"
	Add        Kind = "ADD"
	Env        Kind = "ENV"
	Arg        Kind = "ARG"
	Workdir    Kind = "WORKDIR"
	User       Kind = "USER"
	Label      Kind = "LABEL"
	Shell      Kind = "SHELL"
	Expose     Kind = "EXPOSE"
	Entrypoint Kind = "ENTRYPOINT"
	Cmd        Kind = "CMD"
)

// State is what a step runs in and what the image ends with.
type State struct {
	// Env is the persistent environment (ENV and the base's), in order.
	Env []string `json:"env"`
	// Args are the ARG values in scope (RUN sees them; they do not persist).
	Args       []string          `json:"args,omitempty"`
	User       string            `json:"user,omitempty"`
	Workdir    string            `json:"workdir"`
	Shell      []string          `json:"shell"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Ports      []string          `json:"ports,omitempty"`
}

func (s State) clone() State {
	c := s
	c.Env = append([]string(nil), s.Env...)
	c.Args = append([]string(nil), s.Args...)
	c.Shell = append([]string(nil), s.Shell...)
	c.Entrypoint = append([]string(nil), s.Entrypoint...)
	c.Cmd = append([]string(nil), s.Cmd...)
	c.Ports = append([]string(nil), s.Ports...)
	c.Labels = map[string]string{}
	for k, v := range s.Labels {
		c.Labels[k] = v
	}
	return c
}

// RunEnv is the environment a RUN sees: the persistent environment with
// the ARG values under it (an ENV of the same name wins, as in Docker).
func (s State) RunEnv() []string {
	out := append([]string(nil), s.Env...)
	for _, a := range s.Args {
		k, _, _ := strings.Cut(a, "=")
		if lookup(s.Env, k) == nil {
			out = append(out, a)
		}
	}
	return out
}

// Step is one instruction, expanded, with the state it runs in.
type Step struct {
	Line int
	// Text is the instruction as written.
	Text string
	Kind Kind
	// Argv is a RUN's command (a shell form wrapped in State.Shell).
	Argv []string `json:",omitempty"`
	// Sources, Dest, Chown and Chmod describe a COPY or ADD.
	Sources []string `json:",omitempty"`
	Dest    string   `json:",omitempty"`
	Chown   string   `json:",omitempty"`
	Chmod   string   `json:",omitempty"`
	// State is the state the step runs in (after it, for metadata steps).
	State State
}

// ChangesFiles reports whether a step writes the filesystem (and so needs
// a build sandbox and a cache snapshot).
func (s Step) ChangesFiles() bool {
	return s.Kind == Run || s.Kind == Copy || s.Kind == Add || s.Kind == Workdir
}

// Key identifies what a step does in its state, for the layer cache; the
// caller adds the parent key and, for COPY and ADD, the content hashes.
func (s Step) Key() string {
	b, _ := json.Marshal(struct {
		Kind    Kind
		Argv    []string
		Sources []string
		Dest    string
		Chown   string
		Chmod   string
		State   State
	}{s.Kind, s.Argv, s.Sources, s.Dest, s.Chown, s.Chmod, s.State})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Plan is a Dockerfile ready to build.
type Plan struct {
	// From is the expanded FROM: an image reference or a template slug.
	From     string
	FromLine int
	Steps    []Step
	// Final is the state after the last step (the template's settings).
	Final State
	// UnusedArgs are build arguments no ARG declared.
	UnusedArgs []string
}

// From expands the FROM line with the ARGs declared before it and the
// build arguments.
func (f *File) ExpandFrom(buildArgs map[string]string) (string, error) {
	lex := shell.NewLex('\\')
	var meta []string
	for _, a := range f.metaArgs {
		for _, kv := range a.Args {
			v := ""
			if kv.Value != nil {
				v = *kv.Value
			}
			if b, ok := buildArgs[kv.Key]; ok {
				v = b
			}
			meta = append(meta, kv.Key+"="+v)
		}
	}
	from, _, err := lex.ProcessWord(f.From, shell.EnvsFromSlice(meta))
	if err != nil {
		return "", errAt(f.FromLine, "%s", cleanMsg(err))
	}
	if from == "" || from == "scratch" {
		return "", unsupported(f.FromLine, "FROM %q: start from an image or a template", f.From)
	}
	return from, nil
}

// Plan expands every instruction over base (the FROM image's or
// template's state) with the build arguments.
func (f *File) Plan(base State, buildArgs map[string]string) (Plan, error) {
	from, err := f.ExpandFrom(buildArgs)
	if err != nil {
		return Plan{}, err
	}
	st := base.clone()
	if len(st.Shell) == 0 {
		st.Shell = []string{"/bin/sh", "-c"}
	}
	if st.Workdir == "" {
		st.Workdir = "/"
	}
	if lookup(st.Env, "PATH") == nil {
		st.Env = append(st.Env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	declared := map[string]bool{}
	metaVals := map[string]string{}
	for _, a := range f.metaArgs {
		for _, kv := range a.Args {
			declared[kv.Key] = true
			if kv.Value != nil {
				metaVals[kv.Key] = *kv.Value
			}
			if b, ok := buildArgs[kv.Key]; ok {
				metaVals[kv.Key] = b
			}
		}
	}
	lex := shell.NewLex('\\')
	p := Plan{From: from, FromLine: f.FromLine}
	for _, lc := range f.cmds {
		env := shell.EnvsFromSlice(st.RunEnv())
		expand := func(w string) (string, error) {
			out, _, err := lex.ProcessWord(w, env)
			return out, err
		}
		if ex, ok := lc.cmd.(instructions.SupportsSingleWordExpansion); ok {
			if _, isRun := lc.cmd.(*instructions.RunCommand); !isRun {
				if err := ex.Expand(expand); err != nil {
					return Plan{}, errAt(lc.line, "%s", cleanMsg(err))
				}
			}
		}
		step := Step{Line: lc.line, Text: lc.text}
		switch c := lc.cmd.(type) {
		case *instructions.RunCommand:
			step.Kind, step.Argv = Run, st.command(c.ShellDependantCmdLine)
			if len(step.Argv) == 0 || step.Argv[0] == "" {
				return Plan{}, errAt(lc.line, "RUN needs a command")
			}
		case *instructions.CopyCommand:
			step.Kind, step.Sources, step.Dest, step.Chown, step.Chmod = Copy, c.SourcePaths, c.DestPath, c.Chown, c.Chmod
		case *instructions.AddCommand:
			step.Kind, step.Sources, step.Dest, step.Chown, step.Chmod = Add, c.SourcePaths, c.DestPath, c.Chown, c.Chmod
		case *instructions.EnvCommand:
			step.Kind = Env
			for _, kv := range c.Env {
				st.Env = setVar(st.Env, kv.Key, kv.Value)
			}
		case *instructions.ArgCommand:
			step.Kind = Arg
			for _, kv := range c.Args {
				declared[kv.Key] = true
				v, have := "", false
				if kv.Value != nil {
					v, have = *kv.Value, true
				}
				if mv, ok := metaVals[kv.Key]; ok && kv.Value == nil {
					v, have = mv, true
				}
				if b, ok := buildArgs[kv.Key]; ok {
					v, have = b, true
				}
				if have {
					st.Args = setVar(st.Args, kv.Key, v)
				}
			}
		case *instructions.WorkdirCommand:
			step.Kind = Workdir
			dir := c.Path
			if !path.IsAbs(dir) {
				dir = path.Join(st.Workdir, dir)
			}
			st.Workdir = path.Clean(dir)
		case *instructions.UserCommand:
			step.Kind, st.User = User, c.User
		case *instructions.LabelCommand:
			step.Kind = Label
			for _, kv := range c.Labels {
				if st.Labels == nil {
					st.Labels = map[string]string{}
				}
				st.Labels[kv.Key] = kv.Value
			}
		case *instructions.MaintainerCommand:
			step.Kind = Label
			if st.Labels == nil {
				st.Labels = map[string]string{}
			}
			st.Labels["maintainer"] = c.Maintainer
		case *instructions.ShellCommand:
			step.Kind, st.Shell = Shell, append([]string(nil), c.Shell...)
		case *instructions.ExposeCommand:
			step.Kind = Expose
			for _, port := range c.Ports {
				ep, err := expand(port)
				if err != nil {
					return Plan{}, errAt(lc.line, "%s", cleanMsg(err))
				}
				if !strings.Contains(ep, "/") {
					ep += "/tcp"
				}
				if !contains(st.Ports, ep) {
					st.Ports = append(st.Ports, ep)
				}
			}
			sort.Strings(st.Ports)
		case *instructions.EntrypointCommand:
			step.Kind, st.Entrypoint = Entrypoint, st.command(c.ShellDependantCmdLine)
			st.Cmd = nil // as Docker: a new ENTRYPOINT resets CMD
		case *instructions.CmdCommand:
			step.Kind, st.Cmd = Cmd, st.command(c.ShellDependantCmdLine)
		}
		if step.Kind == Copy || step.Kind == Add {
			if len(step.Sources) == 0 || step.Dest == "" {
				return Plan{}, errAt(lc.line, "%s needs a source and a destination", step.Kind)
			}
			if step.Chmod != "" {
				if _, err := parseMode(step.Chmod); err != nil {
					return Plan{}, errAt(lc.line, "--chmod=%s: %v", step.Chmod, err)
				}
			}
			if !path.IsAbs(step.Dest) {
				keepSlash := strings.HasSuffix(step.Dest, "/")
				step.Dest = path.Join(st.Workdir, step.Dest)
				if keepSlash {
					step.Dest += "/"
				}
			}
		}
		step.State = st.clone()
		p.Steps = append(p.Steps, step)
	}
	p.Final = st.clone()
	p.Final.Args = nil
	for k := range buildArgs {
		if !declared[k] {
			p.UnusedArgs = append(p.UnusedArgs, k)
		}
	}
	sort.Strings(p.UnusedArgs)
	return p, nil
}

// command is a RUN, CMD or ENTRYPOINT's argv: the exec form as given, the
// shell form as one string after the state's shell.
func (s State) command(c instructions.ShellDependantCmdLine) []string {
	if !c.PrependShell {
		return append([]string(nil), c.CmdLine...)
	}
	return append(append([]string(nil), s.Shell...), strings.Join(c.CmdLine, " "))
}

// ParseMode reads a --chmod value (octal).
func ParseMode(mode string) (uint32, error) { return parseMode(mode) }

func lookup(env []string, key string) *string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, _ := strings.Cut(env[i], "="); k == key {
			return &v
		}
	}
	return nil
}

func setVar(env []string, key, value string) []string {
	for i, e := range env {
		if k, _, _ := strings.Cut(e, "="); k == key {
			out := append([]string(nil), env...)
			out[i] = key + "=" + value
			return out
		}
	}
	return append(env, key+"="+value)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
