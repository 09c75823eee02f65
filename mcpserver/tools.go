package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// Limits a model relies on; docs/mcp.md states them too.
const (
	// MaxOutputBytes is how much of each of a command's stdout and stderr
	// exec returns. Past it, exec keeps the first HeadBytes and the last
	// MaxOutputBytes-HeadBytes, sets truncated and says so in note.
	MaxOutputBytes = 32 << 10
	HeadBytes      = 8 << 10
	// MaxReadBytes is the largest file read_file (and a file resource)
	// returns.
	MaxReadBytes = 1 << 20
	// DefaultExecTimeout applies when exec is given no timeout_seconds, so
	// a command that never ends does not hold the agent forever.
	DefaultExecTimeout = 120 * time.Second
	// MaxExecTimeout is the largest timeout_seconds exec takes.
	MaxExecTimeout = time.Hour
	// createTimeout bounds create_sandbox's wait for running (a first
	// pt-base build takes about a minute).
	createTimeout = 15 * time.Minute
	// lifecycleTimeout bounds the waits of stop, start and fork.
	lifecycleTimeout = 10 * time.Minute
)

// tools holds what the tool handlers share. c is the client of the call
// being handled and caller its CallerID: bind sets them from callerFor
// when the server serves many callers (ptd's /mcp), each call with the
// token of its own request.
type tools struct {
	c              *platinum.Client
	caller         string
	callerFor      func(*mcp.RequestExtra) (*platinum.Client, string)
	allowDeleteAny bool
}

// forCall returns the tools a call runs with: t itself, or a copy whose
// client carries the token of the request that brought the call.
func (t *tools) forCall(extra *mcp.RequestExtra) *tools {
	if t.callerFor == nil {
		return t
	}
	cp := *t
	cp.c, cp.caller = t.callerFor(extra)
	return &cp
}

// bind makes a tool method a handler that runs with forCall's tools.
func bind[In, Out any](t *tools, h func(*tools, context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, Out, error)) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		return h(t.forCall(req.Extra), ctx, req, in)
	}
}

// schema reflects T's JSON schema and lets edit add what struct tags
// cannot say (bounds, enums).
func schema[T any](edit func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err)
	}
	if edit != nil {
		edit(s.Properties)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func (t *tools) register(s *mcp.Server) {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}
	mcp.AddTool(s, &mcp.Tool{
		Name:  "create_sandbox",
		Title: "Create a sandbox",
		Description: "Create a new isolated Linux sandbox and wait until it is running (progress notifications report a template build on first use). " +
			`Templates: "busybox" (tiny, starts instantly, BusyBox shell tools only), "pt-base" (Debian with apt), "python-node" (Python 3, Node.js and git; the server's default), "node", "code-interpreter" (Python with numpy, pandas, matplotlib and scipy, for run_code). ` +
			"Returns the sandbox; pass its id to the other tools. Delete it with delete_sandbox when done.",
		InputSchema: schema[createIn](func(p map[string]*jsonschema.Schema) {
			p["cpu"].Minimum, p["cpu"].Maximum = ptr(0.1), ptr(64.0)
			p["ram_mb"].Minimum = ptr(64.0)
			p["disk_gb"].Minimum = ptr(1.0)
			p["ttl_seconds"].Minimum, p["ttl_seconds"].Maximum = ptr(1.0), ptr(3600.0)
			p["network"].Properties["egress"].Enum = []any{"allow", "deny"}
		}),
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(false)},
	}, bind(t, (*tools).create))
	mcp.AddTool(s, &mcp.Tool{
		Name:        "list_sandboxes",
		Title:       "List sandboxes",
		Description: "List the sandboxes this token can see, newest first (deleted ones are left out). created_by_you says which ones you made with create_sandbox or fork_sandbox (by default only those can be deleted).",
		InputSchema: schema[listIn](func(p map[string]*jsonschema.Schema) {
			p["state"].Enum = []any{"creating", "starting", "running", "stopping", "stopped", "archiving", "archived", "restoring", "failed"}
			p["limit"].Minimum, p["limit"].Maximum = ptr(1.0), ptr(200.0)
		}),
		Annotations: readOnly,
	}, bind(t, (*tools).list))
	mcp.AddTool(s, &mcp.Tool{
		Name:        "get_sandbox",
		Title:       "Get a sandbox",
		Description: "Get one sandbox: its state (running, stopped, …), template, size, expiry and metadata.",
		Annotations: readOnly,
	}, bind(t, (*tools).get))
	mcp.AddTool(s, &mcp.Tool{
		Name:  "exec",
		Title: "Run a command",
		Description: "Run a shell command (with /bin/sh -c) in a running sandbox and wait for it. Returns exit_code, stdout and stderr. " +
			fmt.Sprintf("Each of stdout and stderr is cut past %d KiB (the first %d KiB and the last %d KiB are kept, truncated is true and note says how much was cut): ", MaxOutputBytes>>10, HeadBytes>>10, (MaxOutputBytes-HeadBytes)>>10) +
			"redirect big output to a file and read_file it. " +
			fmt.Sprintf("The command is killed after timeout_seconds (default %d, at most %d; timed_out is then true). A non-zero exit is a result, not an error.", int(DefaultExecTimeout.Seconds()), int(MaxExecTimeout.Seconds())),
		InputSchema: schema[execIn](func(p map[string]*jsonschema.Schema) {
			p["command"].MinLength = ptr(1)
			p["timeout_seconds"].Minimum, p["timeout_seconds"].Maximum = ptr(1.0), ptr(MaxExecTimeout.Seconds())
		}),
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(false)},
	}, bind(t, (*tools).exec))
	mcp.AddTool(s, &mcp.Tool{
		Name:  "run_code",
		Title: "Run code in a stateful context",
		Description: "Run a cell of Python (an IPython kernel), JavaScript or bash in a sandbox made from the \"code-interpreter\" template (create_sandbox with template code-interpreter first). " +
			"State persists between calls in the same context: variables, imports, functions, the working directory. Each language has a default context; pass context_id to use another. " +
			"Returns stdout, stderr, the text of each result (the last expression's value is the main result), and an error (name, value, traceback) when the cell raised; " +
			"images (matplotlib figures, PNG/JPEG results) come back as image content. " +
			fmt.Sprintf("The cell is interrupted after timeout_seconds (default %d) and the context keeps its earlier state.", int(DefaultExecTimeout.Seconds())),
		InputSchema: schema[runCodeIn](func(p map[string]*jsonschema.Schema) {
			p["code"].MinLength = ptr(1)
			p["language"].Enum = []any{"python", "javascript", "bash"}
			p["timeout_seconds"].Minimum, p["timeout_seconds"].Maximum = ptr(1.0), ptr(MaxExecTimeout.Seconds())
		}),
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(false)},
	}, bind(t, (*tools).runCode))
	mcp.AddTool(s, &mcp.Tool{
		Name:  "read_file",
		Title: "Read a file",
		Description: fmt.Sprintf("Read a file from a sandbox (at most %d MiB). Text comes back as text, PNG/JPEG/GIF/WebP images as image content, other binary files as a base64 blob. ", MaxReadBytes>>20) +
			"A directory is an error: use list_files.",
		InputSchema: schema[pathIn](func(p map[string]*jsonschema.Schema) { p["path"].MinLength = ptr(1) }),
		Annotations: readOnly,
	}, bind(t, (*tools).readFile))
	mcp.AddTool(s, &mcp.Tool{
		Name:        "write_file",
		Title:       "Write a file",
		Description: "Create or replace a file in a sandbox; missing parent directories are created. content is UTF-8 text unless encoding is \"base64\".",
		InputSchema: schema[writeIn](func(p map[string]*jsonschema.Schema) {
			p["path"].MinLength = ptr(1)
			p["encoding"].Enum = []any{"utf8", "base64"}
		}),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, bind(t, (*tools).writeFile))
	mcp.AddTool(s, &mcp.Tool{
		Name:        "list_files",
		Title:       "List a directory",
		Description: "List a directory in a sandbox: name, path, type (file, dir, symlink), size and mode of each entry.",
		InputSchema: schema[listFilesIn](nil),
		Annotations: readOnly,
	}, bind(t, (*tools).listFiles))
	mcp.AddTool(s, &mcp.Tool{
		Name:  "preview_url",
		Title: "Get a preview URL",
		Description: "Get a URL that reaches a port a server listens on inside the sandbox (e.g. a web app on 8080) through the preview proxy. " +
			"Requests need the token in the X-Pt-Preview-Token header; browser_url carries it in the query string for a browser. " +
			"A request to it also starts a stopped sandbox.",
		InputSchema: schema[previewIn](func(p map[string]*jsonschema.Schema) {
			p["port"].Minimum, p["port"].Maximum = ptr(1.0), ptr(65535.0)
		}),
		Annotations: readOnly,
	}, bind(t, (*tools).preview))
	mcp.AddTool(s, &mcp.Tool{
		Name:        "stop_sandbox",
		Title:       "Stop a sandbox",
		Description: "Stop a running sandbox and wait until it is stopped. Its disk (and memory where the host can) is kept; start_sandbox resumes it. A stopped sandbox costs no CPU.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, bind(t, (*tools).stop))
	mcp.AddTool(s, &mcp.Tool{
		Name:        "start_sandbox",
		Title:       "Start a sandbox",
		Description: "Start a stopped or archived sandbox and wait until it is running.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, bind(t, (*tools).start))
	mcp.AddTool(s, &mcp.Tool{
		Name:        "snapshot_sandbox",
		Title:       "Snapshot a sandbox",
		Description: "Take a snapshot (snap_…) of a sandbox's disk, and its memory where the runtime can, without stopping it. create_sandbox with from_snapshot makes a new sandbox from it; fork_sandbox copies a running sandbox directly.",
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(false)},
	}, bind(t, (*tools).snapshot))
	mcp.AddTool(s, &mcp.Tool{
		Name:  "fork_sandbox",
		Title: "Fork a sandbox",
		Description: "Make count new running copies of a running sandbox (its files, and its processes where the runtime keeps memory), each with its own id and address, as children of the source. " +
			"Useful to try several approaches from the same state. Waits until the copies run.",
		InputSchema: schema[forkIn](func(p map[string]*jsonschema.Schema) {
			p["count"].Minimum, p["count"].Maximum = ptr(1.0), ptr(20.0)
		}),
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(false)},
	}, bind(t, (*tools).fork))
	mcp.AddTool(s, &mcp.Tool{
		Name:  "delete_sandbox",
		Title: "Delete a sandbox",
		Description: "Delete a sandbox and everything in it, for good. " +
			"Only sandboxes you made with create_sandbox or fork_sandbox (created_by_you) can be deleted, unless the server runs with --allow-delete-any: not those of other agents or people, even in your organization. A sandbox with live children (forks) must have them deleted first.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, bind(t, (*tools).delete))
}

// sandboxOut is a sandbox as tools return it: what a model needs to pick
// its next call, not every field of the API's record.
type sandboxOut struct {
	ID           string            `json:"id"`
	Name         string            `json:"name,omitempty"`
	State        string            `json:"state"`
	Template     string            `json:"template"`
	CPU          float64           `json:"cpu"`
	RAMMB        int               `json:"ram_mb"`
	DiskGB       int               `json:"disk_gb"`
	ParentID     string            `json:"parent_id,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	EnvKeys      []string          `json:"env_keys,omitempty"`
	CreatedAt    time.Time         `json:"created_at"`
	ExpiresAt    *time.Time        `json:"expires_at,omitempty"`
	Reason       string            `json:"reason,omitempty" jsonschema:"why the sandbox failed or was deleted"`
	CreatedByMCP bool              `json:"created_by_mcp" jsonschema:"true when an MCP caller (you or another agent) made it with create_sandbox or fork_sandbox"`
	CreatedByYou bool              `json:"created_by_you" jsonschema:"true when you (this token) made it with create_sandbox or fork_sandbox, so delete_sandbox may delete it"`
}

func (t *tools) view(sb *platinum.Sandbox) sandboxOut {
	return sandboxOut{
		ID: sb.ID, Name: sb.Name, State: string(sb.State), Template: sb.Template,
		CPU: sb.CPU, RAMMB: sb.RAMMB, DiskGB: sb.DiskGB, ParentID: sb.ParentID,
		Metadata: sb.Metadata, EnvKeys: sb.EnvKeys, CreatedAt: sb.CreatedAt, ExpiresAt: sb.ExpiresAt,
		Reason: sb.Reason, CreatedByMCP: sb.Metadata[CreatedLabel] != "", CreatedByYou: t.createdByCaller(sb),
	}
}

// createdByCaller reports whether this call's caller made sb through MCP.
func (t *tools) createdByCaller(sb *platinum.Sandbox) bool {
	return t.caller != "" && sb.Metadata[CreatedLabel] == t.caller
}

type networkIn struct {
	Egress   string   `json:"egress,omitempty" jsonschema:"what happens to outbound traffic no list matches: allow (default) or deny"`
	AllowOut []string `json:"allow_out,omitempty" jsonschema:"IPv4 CIDRs or addresses, and domain names (exact, or *.suffix) always allowed; domains cover HTTP and HTTPS"`
	DenyOut  []string `json:"deny_out,omitempty" jsonschema:"IPv4 CIDRs or addresses always blocked (allow_out wins)"`
}

type createIn struct {
	Template     string            `json:"template,omitempty" jsonschema:"template slug: busybox, pt-base, python-node (default) or node; the platinum://templates resource lists them"`
	CPU          float64           `json:"cpu,omitempty" jsonschema:"CPUs (default 1)"`
	RAMMB        int               `json:"ram_mb,omitempty" jsonschema:"memory in MB (default 512)"`
	DiskGB       int               `json:"disk_gb,omitempty" jsonschema:"disk size in GB (default 2)"`
	TTLSeconds   int               `json:"ttl_seconds,omitempty" jsonschema:"lifetime in seconds, at most 3600; the sandbox is deleted when it runs out (default: 1 hour for python-node and node, none for others)"`
	Name         string            `json:"name,omitempty" jsonschema:"a human name, unique in the project"`
	Env          map[string]string `json:"env,omitempty" jsonschema:"environment variables every command in the sandbox gets"`
	Metadata     map[string]string `json:"metadata,omitempty" jsonschema:"labels to find the sandbox by (list_sandboxes filters on them); pt_mcp_created is set by the server"`
	Network      *networkIn        `json:"network,omitempty" jsonschema:"outbound network policy (default: all egress allowed)"`
	FromSnapshot string            `json:"from_snapshot,omitempty" jsonschema:"snapshot ID (snap_…) from snapshot_sandbox: the new sandbox starts as a copy of it (leave template, cpu and ram_mb unset)"`
}

func (t *tools) create(ctx context.Context, req *mcp.CallToolRequest, in createIn) (*mcp.CallToolResult, sandboxOut, error) {
	md := map[string]string{}
	for k, v := range in.Metadata {
		md[k] = v
	}
	md[CreatedLabel] = t.caller
	cr := platinum.CreateSandboxRequest{
		Template: in.Template, CPU: in.CPU, RAMMB: in.RAMMB, DiskGB: in.DiskGB,
		TTLMs: int64(in.TTLSeconds) * 1000, Name: in.Name, Env: in.Env, Metadata: md, FromSnapshot: in.FromSnapshot,
	}
	if in.Network != nil {
		cr.Network = &platinum.NetworkPolicy{Egress: in.Network.Egress, AllowOut: in.Network.AllowOut, DenyOut: in.Network.DenyOut}
	}
	ctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	sb, err := t.c.Sandboxes.Create(ctx, cr)
	if err != nil {
		return nil, sandboxOut{}, toolError(err)
	}
	p := newProgress(req)
	p.send(ctx, fmt.Sprintf("sandbox %s created from %s, booting", sb.ID, sb.Template))
	sb, err = t.waitRunning(ctx, p, sb)
	if err != nil {
		if ctx.Err() != nil {
			// Nobody will learn this sandbox's ID: the call that made it
			// was cancelled (or ran out), so take it back.
			dctx, dcancel := context.WithTimeout(background(ctx), 30*time.Second)
			t.c.Sandboxes.Delete(dctx, sb.ID)
			dcancel()
		}
		return nil, sandboxOut{}, toolError(err)
	}
	return nil, t.view(sb), nil
}

// waitRunning polls a new sandbox until it runs, reporting its state and
// its template's build progress as progress notifications.
func (t *tools) waitRunning(ctx context.Context, p *progress, sb *platinum.Sandbox) (*platinum.Sandbox, error) {
	for {
		switch sb.State {
		case platinum.StateRunning:
			p.send(ctx, fmt.Sprintf("sandbox %s is running", sb.ID))
			return sb, nil
		case platinum.StateFailed, platinum.StateDeleting, platinum.StateDeleted:
			return sb, &platinum.StateError{ID: sb.ID, Want: platinum.StateRunning, Got: sb.State, Reason: sb.Reason}
		}
		msg := fmt.Sprintf("sandbox %s is %s", sb.ID, sb.State)
		if sb.State == platinum.StateCreating {
			if tpl, err := t.c.Templates.Get(ctx, sb.Template); err == nil && tpl.Status == platinum.TemplateBuilding {
				msg = fmt.Sprintf("building template %s: %s", tpl.Slug, tpl.Progress)
			}
		}
		p.send(ctx, msg)
		select {
		case <-ctx.Done():
			return sb, ctx.Err()
		case <-time.After(pollInterval):
		}
		next, err := t.c.Sandboxes.Get(ctx, sb.ID)
		if err != nil {
			return sb, err
		}
		sb = next
	}
}

// pollInterval is how often long calls re-read what they wait for.
const pollInterval = 500 * time.Millisecond

type listIn struct {
	State    string            `json:"state,omitempty" jsonschema:"only sandboxes in this state"`
	Metadata map[string]string `json:"metadata,omitempty" jsonschema:"only sandboxes whose metadata has all these pairs"`
	Limit    int               `json:"limit,omitempty" jsonschema:"at most this many (default 50, at most 200)"`
}

type listOut struct {
	Sandboxes []sandboxOut `json:"sandboxes"`
	Total     int          `json:"total" jsonschema:"how many sandboxes match, across all pages"`
}

func (t *tools) list(ctx context.Context, _ *mcp.CallToolRequest, in listIn) (*mcp.CallToolResult, listOut, error) {
	l, err := t.c.Sandboxes.List(ctx, platinum.ListOptions{State: platinum.State(in.State), Metadata: in.Metadata, Limit: in.Limit})
	if err != nil {
		return nil, listOut{}, toolError(err)
	}
	out := listOut{Sandboxes: make([]sandboxOut, 0, len(l.Rows)), Total: l.Total}
	for i := range l.Rows {
		out.Sandboxes = append(out.Sandboxes, t.view(&l.Rows[i]))
	}
	return nil, out, nil
}

type idIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"ID of the sandbox (sbx_…), as returned by create_sandbox or list_sandboxes"`
}

func (t *tools) get(ctx context.Context, _ *mcp.CallToolRequest, in idIn) (*mcp.CallToolResult, sandboxOut, error) {
	sb, err := t.c.Sandboxes.Get(ctx, in.SandboxID)
	if err != nil {
		return nil, sandboxOut{}, toolError(err)
	}
	return nil, t.view(sb), nil
}

type execIn struct {
	SandboxID      string            `json:"sandbox_id" jsonschema:"ID of the sandbox (sbx_…), as returned by create_sandbox or list_sandboxes"`
	Command        string            `json:"command" jsonschema:"shell command line, run with /bin/sh -c"`
	Cwd            string            `json:"cwd,omitempty" jsonschema:"working directory (default: the sandbox user's home)"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"extra environment variables for this command only"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty" jsonschema:"kill the command after this many seconds (default 120)"`
}

type execOut struct {
	ExitCode  int    `json:"exit_code" jsonschema:"the command's exit status; -1 when it was killed by a signal (also on timeout)"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	TimedOut  bool   `json:"timed_out"`
	Truncated bool   `json:"truncated" jsonschema:"true when stdout or stderr was cut (see note)"`
	Note      string `json:"note,omitempty"`
}

func (t *tools) exec(ctx context.Context, _ *mcp.CallToolRequest, in execIn) (*mcp.CallToolResult, execOut, error) {
	timeout := DefaultExecTimeout
	if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds) * time.Second
	}
	var stdout, stderr headTail
	res, err := t.c.Sandboxes.ExecStream(ctx, in.SandboxID, platinum.ExecRequest{
		Shell: in.Command, Cwd: in.Cwd, Env: in.Env, Timeout: timeout,
	}, &stdout, &stderr)
	if err != nil {
		return nil, execOut{}, toolError(err)
	}
	out := execOut{ExitCode: res.ExitCode, Stdout: stdout.String(), Stderr: stderr.String(), TimedOut: res.TimedOut}
	var notes []string
	for _, s := range []struct {
		name string
		ht   *headTail
	}{{"stdout", &stdout}, {"stderr", &stderr}} {
		if cut := s.ht.cut(); cut > 0 {
			out.Truncated = true
			notes = append(notes, fmt.Sprintf("%s was %d bytes: %d bytes in the middle were cut (first %d and last %d kept)",
				s.name, s.ht.total, cut, HeadBytes, MaxOutputBytes-HeadBytes))
		}
	}
	if out.Truncated {
		out.Note = strings.Join(notes, "; ") + "; redirect the output to a file and read it with read_file or exec head/tail/grep"
	}
	if out.TimedOut {
		out.Note = strings.TrimPrefix(out.Note+fmt.Sprintf("; killed after %s (timeout_seconds)", timeout), "; ")
	}
	return nil, out, nil
}

// headTail keeps the first HeadBytes and the last MaxOutputBytes-HeadBytes
// of what is written to it, so exec's memory stays bounded whatever the
// command prints.
type headTail struct {
	head, tail []byte
	total      int64
}

func (h *headTail) Write(p []byte) (int, error) {
	n0 := len(p)
	h.total += int64(n0)
	if n := min(HeadBytes-len(h.head), len(p)); n > 0 {
		h.head = append(h.head, p[:n]...)
		p = p[n:]
	}
	const tailMax = MaxOutputBytes - HeadBytes
	h.tail = append(h.tail, p...)
	if len(h.tail) > 2*tailMax { // compact now and then, not per write
		h.tail = append(h.tail[:0], h.tail[len(h.tail)-tailMax:]...)
	}
	return n0, nil
}

// cut is how many bytes were dropped.
func (h *headTail) cut() int64 {
	return max(0, h.total-int64(len(h.head))-int64(min(len(h.tail), MaxOutputBytes-HeadBytes)))
}

func (h *headTail) String() string {
	tail := h.tail
	if n := MaxOutputBytes - HeadBytes; len(tail) > n {
		tail = tail[len(tail)-n:]
	}
	if h.cut() == 0 {
		return string(h.head) + string(tail)
	}
	return strings.ToValidUTF8(string(h.head), "") + fmt.Sprintf("\n…[%d bytes cut]…\n", h.cut()) + strings.ToValidUTF8(string(tail), "")
}

type runCodeIn struct {
	SandboxID      string            `json:"sandbox_id" jsonschema:"ID of a running code-interpreter sandbox (sbx_…)"`
	Code           string            `json:"code" jsonschema:"the cell's source"`
	Language       string            `json:"language,omitempty" jsonschema:"python (default), javascript or bash"`
	ContextID      string            `json:"context_id,omitempty" jsonschema:"a context (ctx_…) to run in; default: the language's default context"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"extra environment variables for this cell only"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty" jsonschema:"interrupt the cell after this many seconds (default 120)"`
}

type runCodeOut struct {
	Stdout         string          `json:"stdout"`
	Stderr         string          `json:"stderr"`
	Results        []codeResultOut `json:"results" jsonschema:"the cell's rich results in order; images are also sent as image content"`
	Error          *codeErrorOut   `json:"error,omitempty" jsonschema:"set when the cell raised; the context still works"`
	Status         string          `json:"status" jsonschema:"ok, error or timeout"`
	ContextID      string          `json:"context_id"`
	ExecutionCount int             `json:"execution_count"`
	Note           string          `json:"note,omitempty"`
}

type codeResultOut struct {
	Text         string   `json:"text,omitempty" jsonschema:"the text/plain form"`
	Formats      []string `json:"formats" jsonschema:"the MIME types this result has"`
	IsMainResult bool     `json:"is_main_result" jsonschema:"true for the value of the cell's last expression"`
}

type codeErrorOut struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// imageTypes are the result formats sent back as MCP image content.
var imageTypes = []string{"image/png", "image/jpeg"}

func (t *tools) runCode(ctx context.Context, _ *mcp.CallToolRequest, in runCodeIn) (*mcp.CallToolResult, runCodeOut, error) {
	timeout := DefaultExecTimeout
	if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds) * time.Second
	}
	ex, err := t.c.Sandboxes.RunCode(ctx, in.SandboxID, platinum.RunCodeRequest{
		Code: in.Code, Language: in.Language, ContextID: in.ContextID, Env: in.Env, Timeout: timeout,
	})
	if err != nil {
		return nil, runCodeOut{}, toolError(err)
	}
	var stdout, stderr headTail
	stdout.Write([]byte(ex.Stdout))
	stderr.Write([]byte(ex.Stderr))
	out := runCodeOut{Stdout: stdout.String(), Stderr: stderr.String(), Status: ex.Status, ContextID: ex.ContextID,
		ExecutionCount: ex.ExecutionCount, Results: []codeResultOut{}}
	if ex.KernelRestarted != "" {
		out.Note = "this cell ran in a fresh kernel (earlier state is gone): " + ex.KernelRestarted
	}
	if ex.Error != nil {
		out.Error = &codeErrorOut{Name: ex.Error.Name, Value: ex.Error.Value, Traceback: ex.Error.Traceback}
	}
	var images []mcp.Content
	for _, r := range ex.Results {
		ro := codeResultOut{Text: r.Text(), IsMainResult: r.IsMainResult, Formats: make([]string, 0, len(r.Data))}
		for mime := range r.Data {
			ro.Formats = append(ro.Formats, mime)
		}
		slices.Sort(ro.Formats)
		for _, mime := range imageTypes {
			if b := r.Binary(mime); len(b) > 0 {
				images = append(images, &mcp.ImageContent{Data: b, MIMEType: mime})
				break
			}
		}
		out.Results = append(out.Results, ro)
	}
	if len(images) == 0 {
		return nil, out, nil
	}
	// With content of its own, the result's text part is the structured
	// output as JSON (what the SDK would have sent alone), then the images.
	js, _ := json.Marshal(out)
	return &mcp.CallToolResult{Content: append([]mcp.Content{&mcp.TextContent{Text: string(js)}}, images...)}, out, nil
}

type pathIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"ID of the sandbox (sbx_…), as returned by create_sandbox or list_sandboxes"`
	Path      string `json:"path" jsonschema:"absolute path in the sandbox, or relative to the sandbox user's home"`
}

func (t *tools) readFile(ctx context.Context, _ *mcp.CallToolRequest, in pathIn) (*mcp.CallToolResult, any, error) {
	b, err := t.read(ctx, in.SandboxID, in.Path)
	if err != nil {
		return nil, nil, toolError(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{fileContent(fileURI(in.SandboxID, in.Path), b)}}, nil, nil
}

// read downloads a whole file of at most MaxReadBytes.
func read(ctx context.Context, c *platinum.Client, id, path string) ([]byte, error) {
	rc, err := c.Sandboxes.Download(ctx, id, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, MaxReadBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxReadBytes {
		return nil, &platinum.APIError{StatusCode: http.StatusRequestEntityTooLarge, Code: platinum.CodePayloadTooLarge,
			Message: fmt.Sprintf("%s is over read_file's %d MiB limit; read parts of it with exec (head, tail, sed -n)", path, MaxReadBytes>>20)}
	}
	return b, nil
}

func (t *tools) read(ctx context.Context, id, path string) ([]byte, error) {
	return read(ctx, t.c, id, path)
}

// fileContent is text for UTF-8, image content for an image, else an
// embedded base64 blob.
func fileContent(uri string, b []byte) mcp.Content {
	if utf8.Valid(b) {
		return &mcp.TextContent{Text: string(b)}
	}
	mt := http.DetectContentType(b)
	if strings.HasPrefix(mt, "image/") {
		return &mcp.ImageContent{Data: b, MIMEType: mt}
	}
	return &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: uri, MIMEType: mt, Blob: b}}
}

type writeIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"ID of the sandbox (sbx_…), as returned by create_sandbox or list_sandboxes"`
	Path      string `json:"path" jsonschema:"absolute path in the sandbox, or relative to the sandbox user's home"`
	Content   string `json:"content" jsonschema:"the file's whole new content"`
	Encoding  string `json:"encoding,omitempty" jsonschema:"utf8 (default) or base64 for binary content"`
}

type writeOut struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes" jsonschema:"how many bytes were written"`
}

func (t *tools) writeFile(ctx context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, writeOut, error) {
	b := []byte(in.Content)
	if in.Encoding == "base64" {
		var err error
		if b, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return nil, writeOut{}, argError("content", "content is not valid base64: %v", err)
		}
	}
	if err := t.c.Sandboxes.Upload(ctx, in.SandboxID, in.Path, bytes.NewReader(b)); err != nil {
		return nil, writeOut{}, toolError(err)
	}
	return nil, writeOut{Path: in.Path, Bytes: len(b)}, nil
}

type listFilesIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"ID of the sandbox (sbx_…), as returned by create_sandbox or list_sandboxes"`
	Path      string `json:"path,omitempty" jsonschema:"directory to list (default: the sandbox user's home)"`
}

type listFilesOut struct {
	Entries []platinum.FileEntry `json:"entries"`
}

func (t *tools) listFiles(ctx context.Context, _ *mcp.CallToolRequest, in listFilesIn) (*mcp.CallToolResult, listFilesOut, error) {
	path := in.Path
	if path == "" {
		path = "."
	}
	es, err := t.c.Sandboxes.ListFiles(ctx, in.SandboxID, path)
	if err != nil {
		return nil, listFilesOut{}, toolError(err)
	}
	return nil, listFilesOut{Entries: es}, nil
}

type previewIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"ID of the sandbox (sbx_…), as returned by create_sandbox or list_sandboxes"`
	Port      int    `json:"port" jsonschema:"TCP port a server listens on inside the sandbox"`
}

type previewOut struct {
	URL         string     `json:"url" jsonschema:"routes by host name; send the token in X-Pt-Preview-Token"`
	PathURL     string     `json:"path_url" jsonschema:"the same port routed by path, for clients that cannot set the Host"`
	BrowserURL  string     `json:"browser_url" jsonschema:"url with the token in its query string, to open in a browser"`
	Token       string     `json:"token"`
	TokenHeader string     `json:"token_header"`
	Public      bool       `json:"public" jsonschema:"true when the port answers without a token"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
}

func (t *tools) preview(ctx context.Context, _ *mcp.CallToolRequest, in previewIn) (*mcp.CallToolResult, previewOut, error) {
	u, err := t.c.Sandboxes.PreviewURL(ctx, in.SandboxID, in.Port, nil)
	if err != nil {
		return nil, previewOut{}, toolError(err)
	}
	return nil, previewOut{URL: u.URL, PathURL: u.PathURL, BrowserURL: u.BrowserURL, Token: u.Token,
		TokenHeader: platinum.PreviewTokenHeader, Public: u.Public, ExpiresAt: u.ExpiresAt}, nil
}

func (t *tools) stop(ctx context.Context, req *mcp.CallToolRequest, in idIn) (*mcp.CallToolResult, sandboxOut, error) {
	return t.lifecycle(ctx, req, in.SandboxID, t.c.Sandboxes.Stop, platinum.WaitForStopped(0))
}

func (t *tools) start(ctx context.Context, req *mcp.CallToolRequest, in idIn) (*mcp.CallToolResult, sandboxOut, error) {
	return t.lifecycle(ctx, req, in.SandboxID, t.c.Sandboxes.Start, platinum.WaitForRunning(0))
}

// lifecycle runs a stop or start that waits, reporting each state it sees.
func (t *tools) lifecycle(ctx context.Context, req *mcp.CallToolRequest, id string,
	call func(context.Context, string, ...platinum.LifecycleOption) (*platinum.Sandbox, error), wait platinum.WaitOption) (*mcp.CallToolResult, sandboxOut, error) {
	ctx, cancel := context.WithTimeout(ctx, lifecycleTimeout)
	defer cancel()
	p := newProgress(req)
	sb, err := call(ctx, id, wait, platinum.OnStateChange(func(sb *platinum.Sandbox) {
		msg := fmt.Sprintf("sandbox %s is %s", sb.ID, sb.State)
		if pct := sb.Progress.Percent(); pct >= 0 {
			msg += fmt.Sprintf(" (%s %d%%)", sb.Progress.Op, pct)
		}
		p.send(ctx, msg)
	}))
	if err != nil {
		return nil, sandboxOut{}, toolError(err)
	}
	return nil, t.view(sb), nil
}

type snapshotIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"ID of the sandbox (sbx_…), as returned by create_sandbox or list_sandboxes"`
	Name      string `json:"name,omitempty" jsonschema:"a name for the snapshot"`
}

type snapshotOut struct {
	ID        string    `json:"id"`
	SandboxID string    `json:"sandbox_id"`
	Name      string    `json:"name,omitempty"`
	State     string    `json:"state"`
	Memory    bool      `json:"memory" jsonschema:"true when the snapshot holds the processes' memory too"`
	SizeBytes int64     `json:"size_bytes"`
	CreatedAt time.Time `json:"created_at"`
}

func (t *tools) snapshot(ctx context.Context, req *mcp.CallToolRequest, in snapshotIn) (*mcp.CallToolResult, snapshotOut, error) {
	var snap *platinum.Snapshot
	err := newProgress(req).during(ctx, "snapshot of "+in.SandboxID, func(ctx context.Context) error {
		var err error
		snap, err = t.c.Sandboxes.Snapshot(ctx, in.SandboxID, platinum.SnapshotOptions{Name: in.Name})
		return err
	})
	if err != nil {
		return nil, snapshotOut{}, toolError(err)
	}
	return nil, snapshotOut{ID: snap.ID, SandboxID: snap.SandboxID, Name: snap.Name, State: string(snap.State),
		Memory: snap.Memory, SizeBytes: snap.SizeBytes, CreatedAt: snap.CreatedAt}, nil
}

type forkIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"ID of the running sandbox to copy"`
	Count     int    `json:"count,omitempty" jsonschema:"how many copies (default 1, at most 20)"`
}

type forkOut struct {
	Sandboxes []sandboxOut `json:"sandboxes"`
	Memory    bool         `json:"memory" jsonschema:"true when the copies continue the source's processes; false when they booted on copies of its disk"`
	Note      string       `json:"note,omitempty"`
}

func (t *tools) fork(ctx context.Context, req *mcp.CallToolRequest, in forkIn) (*mcp.CallToolResult, forkOut, error) {
	ctx, cancel := context.WithTimeout(ctx, lifecycleTimeout)
	defer cancel()
	var res *platinum.ForkResult
	err := newProgress(req).during(ctx, "fork of "+in.SandboxID, func(ctx context.Context) error {
		var err error
		// The copies are the caller's: label them so, whoever made the
		// source (they would inherit its label).
		res, err = t.c.Sandboxes.Fork(ctx, in.SandboxID, platinum.ForkOptions{Count: max(in.Count, 1), Wait: true,
			Metadata: map[string]string{CreatedLabel: t.caller}})
		return err
	})
	if err != nil {
		return nil, forkOut{}, toolError(err)
	}
	out := forkOut{Sandboxes: make([]sandboxOut, 0, len(res.Sandboxes)), Memory: res.Memory, Note: res.MemoryReason}
	for i := range res.Sandboxes {
		out.Sandboxes = append(out.Sandboxes, t.view(&res.Sandboxes[i]))
	}
	return nil, out, nil
}

type deleteOut struct {
	ID    string `json:"id"`
	State string `json:"state" jsonschema:"deleting: the teardown finishes in the background"`
}

func (t *tools) delete(ctx context.Context, _ *mcp.CallToolRequest, in idIn) (*mcp.CallToolResult, deleteOut, error) {
	if !t.allowDeleteAny {
		sb, err := t.c.Sandboxes.Get(ctx, in.SandboxID)
		if err != nil {
			return nil, deleteOut{}, toolError(err)
		}
		if !t.createdByCaller(sb) {
			who := "was not created through MCP"
			if sb.Metadata[CreatedLabel] != "" {
				who = "was created through MCP with another token"
			}
			return nil, deleteOut{}, fmt.Errorf("[%s] sandbox %s %s (its %s label is not this token's), so delete_sandbox refuses it: "+
				"only sandboxes you made with create_sandbox or fork_sandbox can be deleted here. "+
				"Delete it with the pt CLI or the API, or run the server with --allow-delete-any", platinum.CodeForbidden, sb.ID, who, CreatedLabel)
		}
	}
	sb, err := t.c.Sandboxes.Delete(ctx, in.SandboxID)
	if err != nil {
		return nil, deleteOut{}, toolError(err)
	}
	return nil, deleteOut{ID: sb.ID, State: string(sb.State)}, nil
}
