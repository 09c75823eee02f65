// Package mcpcompat proves Platinum's MCP server against a real ptd with
// real MCP clients: the Go SDK's client over both transports (`pt mcp` on
// stdio, and ptd's /mcp over Streamable HTTP), and TestNodeSDK runs the
// official @modelcontextprotocol/sdk npm package (pinned in
// package-lock.json) against /mcp with node --test.
package mcpcompat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	"github.com/platinum-dev/platinum/internal/runnercheck"
	"github.com/platinum-dev/platinum/internal/testenv"
	"github.com/platinum-dev/platinum/mcpserver"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// env is the one ptd every test of this package talks to.
var env struct {
	url, token, previewURL, binDir string
	// root is the repository, for a second ptd (TestPtdAllowDeleteAny).
	root string
	skip string
}

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	env.root, _ = ptdtest.RepoRoot()
	env.skip = "MCP tests need root (they run real sandboxes)"
	// --max-create-ttl below create_sandbox's own 3600 s bound, so the API
	// itself refuses a ttl_seconds the tool's schema lets through
	// (TestAPIFieldErrors). The templates are built before any test, so
	// creates take milliseconds (code-interpreter's first build on a new
	// machine takes minutes, longer than a tool call's wait in the tests).
	o := ptdtest.Options{ExtraArgs: ptdArgs, Warm: []string{"busybox", "code-interpreter"}}
	return ptdtest.Main(m, "mcp compat", o, func(d *ptdtest.Daemon) error {
		env.url, env.token, env.previewURL, env.binDir, env.skip = d.URL, d.Token, d.PreviewURL, d.BinDir, ""
		return nil
	})
}

// ptdArgs are the flags of the tests' ptd (and of TestPtdAllowDeleteAny's).
var ptdArgs = []string{"--pids-limit", "256", "--max-create-ttl", "30m"}

func need(t *testing.T) {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
}

// api is a /v1 client with the admin token, for set-up and checks that
// must not go through MCP.
func api() *platinum.Client { return platinum.New(env.url, env.token) }

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// progressLog collects the progress notifications a client receives.
type progressLog struct {
	mu   sync.Mutex
	msgs map[any][]string
}

func (p *progressLog) handler(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.msgs == nil {
		p.msgs = map[any][]string{}
	}
	tok := fmt.Sprint(req.Params.ProgressToken)
	p.msgs[tok] = append(p.msgs[tok], req.Params.Message)
}

func (p *progressLog) of(tok string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.msgs[tok])
}

// until returns the notifications of tok once ok holds for them, or
// after 10 s: the client runs its notification handler apart from the
// call's result, so the last ones may land just after the result.
func (p *progressLog) until(tok string, ok func([]string) bool) []string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		msgs := p.of(tok)
		if ok(msgs) || time.Now().After(deadline) {
			return msgs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// session is a connected MCP client.
type session struct {
	t        *testing.T
	cs       *mcp.ClientSession
	progress *progressLog
}

// transports are the two ways an agent reaches the server.
var transports = []string{"stdio", "http"}

// onEachTransport runs f as a subtest per transport, each with a session
// of its own with the tests' token.
func onEachTransport(t *testing.T, f func(t *testing.T, tr string, s *session)) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { f(t, tr, connect(t, tr, env.token)) })
	}
}

// connect opens an MCP session over transport with token to the tests'
// ptd; extra args go to `pt mcp` (stdio only).
func connect(t *testing.T, transport, token string, extra ...string) *session {
	t.Helper()
	return dial(t, transport, env.url, token, extra...)
}

// dial is connect to the ptd (or the proxy in front of it) at apiURL.
func dial(t *testing.T, transport, apiURL, token string, extra ...string) *session {
	t.Helper()
	pl := &progressLog{}
	client := mcp.NewClient(&mcp.Implementation{Name: "platinum-mcp-test", Version: "1"},
		&mcp.ClientOptions{ProgressNotificationHandler: pl.handler})
	var tr mcp.Transport
	switch transport {
	case "stdio":
		cmd := exec.Command(filepath.Join(env.binDir, "pt"), append([]string{"mcp"}, extra...)...)
		cmd.Env = append(os.Environ(), "PT_API_URL="+apiURL, "PT_TOKEN="+token)
		cmd.Stderr = os.Stderr
		tr = &mcp.CommandTransport{Command: cmd}
	case "http":
		if len(extra) > 0 {
			t.Fatalf("http transport takes no pt mcp flags")
		}
		tr = &mcp.StreamableClientTransport{Endpoint: apiURL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", transport, err)
	}
	t.Cleanup(func() { cs.Close() })
	return &session{t: t, cs: cs, progress: pl}
}

// call calls a tool and returns its result (a tool error is a result).
func (s *session) call(ctx context.Context, name string, args map[string]any, progressToken ...string) *mcp.CallToolResult {
	s.t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if len(progressToken) > 0 {
		p.SetProgressToken(progressToken[0])
	}
	res, err := s.cs.CallTool(ctx, p)
	if err != nil {
		s.t.Fatalf("%s: protocol error: %v", name, err)
	}
	return res
}

// ok calls a tool that must succeed and decodes its structured result.
func (s *session) ok(name string, args map[string]any, out any, progressToken ...string) *mcp.CallToolResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res := s.call(ctx, name, args, progressToken...)
	if res.IsError {
		s.t.Fatalf("%s(%v): tool error: %s", name, args, text(res))
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s: structured content %s: %v", name, b, err)
		}
	}
	return res
}

// fails calls a tool that must fail and returns the error text.
func (s *session) fails(name string, args map[string]any) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := s.call(ctx, name, args)
	if !res.IsError {
		s.t.Fatalf("%s(%v) succeeded, want a tool error: %s", name, args, text(res))
	}
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

type sandboxOut struct {
	ID           string            `json:"id"`
	State        string            `json:"state"`
	Template     string            `json:"template"`
	Metadata     map[string]string `json:"metadata"`
	EnvKeys      []string          `json:"env_keys"`
	CreatedByMCP bool              `json:"created_by_mcp"`
	CreatedByYou bool              `json:"created_by_you"`
}

// create makes a busybox sandbox through MCP and deletes it (through /v1)
// when the test ends.
func (s *session) create(args map[string]any) sandboxOut {
	s.t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	args["template"] = "busybox"
	var sb sandboxOut
	s.ok("create_sandbox", args, &sb)
	s.t.Cleanup(func() { api().Sandboxes.Delete(context.Background(), sb.ID) })
	return sb
}

var wantTools = []string{
	"create_sandbox", "delete_sandbox", "exec", "fork_sandbox", "get_sandbox", "list_files", "list_sandboxes",
	"preview_url", "read_file", "run_code", "snapshot_sandbox", "start_sandbox", "stop_sandbox", "write_file",
}

// TestTools walks an agent's whole session on each transport: tools and
// their schemas, create (with progress), exec, files and a file resource,
// a preview URL fetched through the proxy, errors, delete.
func TestTools(t *testing.T) {
	need(t)
	onEachTransport(t, func(t *testing.T, tr string, s *session) {
		ctx := context.Background()

		tools, err := s.cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		schemas := map[string]map[string]any{}
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
			if len(tool.Description) < 40 {
				t.Errorf("%s: description %q is too thin to choose by", tool.Name, tool.Description)
			}
			b, _ := json.Marshal(tool.InputSchema)
			var m map[string]any
			json.Unmarshal(b, &m)
			schemas[tool.Name] = m
			if m["type"] != "object" {
				t.Errorf("%s: input schema type %v", tool.Name, m["type"])
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, wantTools) {
			t.Fatalf("tools %v, want %v", names, wantTools)
		}
		for tool, want := range map[string]struct{ props, required []string }{
			"create_sandbox": {[]string{"template", "cpu", "ram_mb", "disk_gb", "ttl_seconds", "env", "metadata", "network"}, nil},
			"exec":           {[]string{"sandbox_id", "command", "cwd", "env", "timeout_seconds"}, []string{"command", "sandbox_id"}},
			"write_file":     {[]string{"sandbox_id", "path", "content", "encoding"}, []string{"content", "path", "sandbox_id"}},
			"preview_url":    {[]string{"sandbox_id", "port"}, []string{"port", "sandbox_id"}},
			"delete_sandbox": {[]string{"sandbox_id"}, []string{"sandbox_id"}},
			"run_code":       {[]string{"sandbox_id", "code", "language", "context_id", "env", "timeout_seconds"}, []string{"code", "sandbox_id"}},
		} {
			props, _ := schemas[tool]["properties"].(map[string]any)
			for _, p := range want.props {
				if pm, ok := props[p].(map[string]any); !ok || pm["description"] == nil {
					t.Errorf("%s: property %q missing or undescribed: %v", tool, p, props[p])
				}
			}
			var req []string
			reqs, _ := schemas[tool]["required"].([]any)
			for _, r := range reqs {
				req = append(req, fmt.Sprint(r))
			}
			slices.Sort(req)
			if want.required != nil && !slices.Equal(req, want.required) {
				t.Errorf("%s: required %v, want %v", tool, req, want.required)
			}
			if schemas[tool]["additionalProperties"] != false {
				t.Errorf("%s: schema allows unknown arguments", tool)
			}
		}
		pvProps, _ := schemas["preview_url"]["properties"].(map[string]any)
		if port, _ := pvProps["port"].(map[string]any); port["maximum"] != 65535.0 {
			t.Errorf("preview_url port schema %v, want maximum 65535", port)
		}

		var sb sandboxOut
		s.ok("create_sandbox", map[string]any{"template": "busybox", "ttl_seconds": 600, "metadata": map[string]any{"purpose": "mcp-test"}}, &sb, "create-1")
		t.Cleanup(func() { api().Sandboxes.Delete(context.Background(), sb.ID) })
		if sb.State != "running" || sb.Template != "busybox" || !sb.CreatedByMCP || !sb.CreatedByYou ||
			sb.Metadata[mcpserver.CreatedLabel] != mcpserver.CallerID(env.token) || sb.Metadata["purpose"] != "mcp-test" {
			t.Fatalf("created %+v", sb)
		}
		endsRunning := func(p []string) bool { return len(p) > 0 && strings.HasSuffix(p[len(p)-1], "is running") }
		if p := s.progress.until("create-1", endsRunning); !endsRunning(p) {
			t.Errorf("create progress notifications %q, want some ending in running", p)
		}
		got, err := api().Sandboxes.Get(ctx, sb.ID)
		if err != nil || got.State != platinum.StateRunning || got.ExpiresAt == nil {
			t.Fatalf("/v1 sees %+v, %v", got, err)
		}

		var ex struct {
			ExitCode  int    `json:"exit_code"`
			Stdout    string `json:"stdout"`
			Stderr    string `json:"stderr"`
			Truncated bool   `json:"truncated"`
			TimedOut  bool   `json:"timed_out"`
			Note      string `json:"note"`
		}
		s.ok("exec", map[string]any{"sandbox_id": sb.ID, "command": "echo hi; echo oops >&2; exit 3"}, &ex)
		if ex.ExitCode != 3 || ex.Stdout != "hi\n" || ex.Stderr != "oops\n" || ex.Truncated {
			t.Errorf("exec: %+v", ex)
		}
		s.ok("exec", map[string]any{"sandbox_id": sb.ID, "command": "echo $GREETING from $PWD", "cwd": "/tmp", "env": map[string]any{"GREETING": "hello"}}, &ex)
		if ex.Stdout != "hello from /tmp\n" {
			t.Errorf("exec with env and cwd: %+v", ex)
		}
		// 100000 bytes of output: the first 8 KiB and the last 24 KiB.
		s.ok("exec", map[string]any{"sandbox_id": sb.ID, "command": "head -c 50000 /dev/zero | tr '\\0' a; head -c 50000 /dev/zero | tr '\\0' b"}, &ex)
		if !ex.Truncated || !strings.HasPrefix(ex.Stdout, strings.Repeat("a", mcpserver.HeadBytes)+"\n…[") ||
			!strings.HasSuffix(ex.Stdout, "…\n"+strings.Repeat("b", mcpserver.MaxOutputBytes-mcpserver.HeadBytes)) ||
			!strings.Contains(ex.Note, "stdout was 100000 bytes") {
			t.Errorf("big output: truncated %v, %d bytes, note %q", ex.Truncated, len(ex.Stdout), ex.Note)
		}
		s.ok("exec", map[string]any{"sandbox_id": sb.ID, "command": "sleep 30", "timeout_seconds": 1}, &ex)
		if !ex.TimedOut || ex.ExitCode != -1 {
			t.Errorf("timeout: %+v", ex)
		}

		// Concurrent calls on one session each get their own output.
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{
					"sandbox_id": sb.ID, "command": fmt.Sprintf("sleep 0.%d; echo call-%d", 6-i, i)}})
				if err != nil {
					t.Errorf("concurrent exec %d: %v", i, err)
					return
				}
				want := fmt.Sprintf(`"stdout":"call-%d\n"`, i)
				if b, _ := json.Marshal(res.StructuredContent); res.IsError || !strings.Contains(string(b), want) {
					t.Errorf("concurrent exec %d: %s", i, b)
				}
			})
		}
		wg.Wait()

		var wr struct{ Bytes int }
		s.ok("write_file", map[string]any{"sandbox_id": sb.ID, "path": "/root/notes/hello.txt", "content": "hello from mcp\n"}, &wr)
		if wr.Bytes != 15 {
			t.Errorf("write_file wrote %d bytes", wr.Bytes)
		}
		if res := s.ok("read_file", map[string]any{"sandbox_id": sb.ID, "path": "/root/notes/hello.txt"}, nil); text(res) != "hello from mcp\n" {
			t.Errorf("read_file: %q", text(res))
		}
		png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
		s.ok("write_file", map[string]any{"sandbox_id": sb.ID, "path": "/root/dot.png", "content": png, "encoding": "base64"}, nil)
		res := s.ok("read_file", map[string]any{"sandbox_id": sb.ID, "path": "/root/dot.png"}, nil)
		if len(res.Content) != 1 {
			t.Fatalf("read_file of a PNG: %d contents", len(res.Content))
		}
		if img, ok := res.Content[0].(*mcp.ImageContent); !ok || img.MIMEType != "image/png" || len(img.Data) != 70 {
			t.Errorf("read_file of a PNG: %#v", res.Content[0])
		}
		var ls struct {
			Entries []struct{ Name, Type string }
		}
		s.ok("list_files", map[string]any{"sandbox_id": sb.ID, "path": "/root"}, &ls)
		if !slices.ContainsFunc(ls.Entries, func(e struct{ Name, Type string }) bool { return e.Name == "notes" && e.Type == "dir" }) {
			t.Errorf("list_files /root: %+v", ls.Entries)
		}
		var home struct {
			Entries []struct{ Name, Path string }
		}
		s.ok("list_files", map[string]any{"sandbox_id": sb.ID}, &home)
		s.ok("exec", map[string]any{"sandbox_id": sb.ID, "command": "ls -A ~ | sort"}, &ex)
		var homeNames []string
		for _, e := range home.Entries {
			homeNames = append(homeNames, e.Name)
		}
		slices.Sort(homeNames)
		if strings.Join(homeNames, "\n")+"\n" != ex.Stdout {
			t.Errorf("list_files without a path lists %v; the home directory has %q", homeNames, ex.Stdout)
		}

		rt, err := s.cs.ListResourceTemplates(ctx, nil)
		if err != nil || len(rt.ResourceTemplates) != 1 || rt.ResourceTemplates[0].URITemplate != mcpserver.FilesTemplate {
			t.Fatalf("resource templates: %+v, %v", rt, err)
		}
		rr, err := s.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "platinum://sandboxes/" + sb.ID + "/files/root/notes/hello.txt"})
		if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "hello from mcp\n" {
			t.Fatalf("file resource: %+v, %v", rr, err)
		}
		if _, err := s.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "platinum://sandboxes/" + sb.ID + "/files/root/missing"}); err == nil {
			t.Error("a missing file's resource read succeeded")
		}
		rr, err = s.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.TemplatesURI})
		if err != nil || !strings.Contains(rr.Contents[0].Text, `"slug": "busybox"`) {
			t.Fatalf("templates resource: %+v, %v", rr, err)
		}

		// A server in the sandbox, reached through its preview URL.
		s.ok("exec", map[string]any{"sandbox_id": sb.ID, "command": "mkdir -p /root/www && echo preview-" + tr + " > /root/www/index.html && (busybox httpd -p 8080 -h /root/www &)"}, &ex)
		if ex.ExitCode != 0 {
			t.Fatalf("start httpd: %+v", ex)
		}
		var pv struct {
			URL, PathURL, Token, TokenHeader string
		}
		res = s.ok("preview_url", map[string]any{"sandbox_id": sb.ID, "port": 8080}, nil)
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &struct {
			URL         *string `json:"url"`
			PathURL     *string `json:"path_url"`
			Token       *string `json:"token"`
			TokenHeader *string `json:"token_header"`
		}{&pv.URL, &pv.PathURL, &pv.Token, &pv.TokenHeader})
		if !strings.HasSuffix(pv.PathURL, "/"+sb.ID+"/8080/") || !strings.Contains(pv.URL, "8080-") || pv.Token == "" || pv.TokenHeader != platinum.PreviewTokenHeader {
			t.Fatalf("preview_url: %s", b)
		}
		body := fetchPreview(t, pv.PathURL, pv.TokenHeader, pv.Token)
		if body != "preview-"+tr+"\n" {
			t.Errorf("through the preview URL: %q", body)
		}

		// Bad arguments are tool errors that name the argument.
		for _, c := range []struct {
			tool string
			args map[string]any
			want string
		}{
			{"exec", map[string]any{"sandbox_id": sb.ID}, "command"},
			{"exec", map[string]any{"sandbox_id": sb.ID, "command": "true", "timeout_seconds": "soon"}, "timeout_seconds"},
			{"preview_url", map[string]any{"sandbox_id": sb.ID, "port": 70000}, "port"},
			{"create_sandbox", map[string]any{"template": "busybox", "colour": "red"}, "colour"},
			{"write_file", map[string]any{"sandbox_id": sb.ID, "path": "/root/x", "content": "!!", "encoding": "base64"}, `argument "content"`},
			{"create_sandbox", map[string]any{"template": "busybox", "ttl_seconds": 7200}, "ttl_seconds"},
		} {
			if msg := s.fails(c.tool, c.args); !strings.Contains(msg, c.want) {
				t.Errorf("%s(%v): error %q does not name %q", c.tool, c.args, msg, c.want)
			}
		}
		// API errors carry the API's code.
		if msg := s.fails("get_sandbox", map[string]any{"sandbox_id": "sbx_01JZZZZZZZZZZZZZZZZZZZZZZZ"}); !strings.HasPrefix(msg, "[not_found]") {
			t.Errorf("unknown sandbox: %q", msg)
		}
		if msg := s.fails("read_file", map[string]any{"sandbox_id": sb.ID, "path": "/root/nope"}); !strings.HasPrefix(msg, "[not_found]") {
			t.Errorf("missing file: %q", msg)
		}

		var l struct {
			Sandboxes []sandboxOut
			Total     int
		}
		s.ok("list_sandboxes", map[string]any{"metadata": map[string]any{"purpose": "mcp-test"}}, &l)
		if !slices.ContainsFunc(l.Sandboxes, func(x sandboxOut) bool { return x.ID == sb.ID && x.CreatedByMCP && x.CreatedByYou }) {
			t.Errorf("list_sandboxes: %+v", l)
		}

		var del struct{ ID, State string }
		s.ok("delete_sandbox", map[string]any{"sandbox_id": sb.ID}, &del)
		if del.ID != sb.ID || (del.State != "deleting" && del.State != "deleted") {
			t.Errorf("delete: %+v", del)
		}
		if !gone(sb.ID) {
			t.Errorf("after delete_sandbox, /v1 still sees %s live", sb.ID)
		}
	})
}

// gone reports whether /v1 sees the sandbox deleting or deleted.
func gone(id string) bool {
	sb, err := api().Sandboxes.Get(context.Background(), id)
	return platinum.IsNotFound(err) || err == nil && (sb.State == platinum.StateDeleting || sb.State == platinum.StateDeleted)
}

// fetchPreview GETs url with the preview token, retrying while the server
// in the sandbox starts.
func fetchPreview(t *testing.T, url, header, token string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set(header, token)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return string(b)
			}
			err = fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestLifecycleTools: stop, start, snapshot and fork, with their
// progress, on each transport; the copies are the caller's.
func TestLifecycleTools(t *testing.T) {
	need(t)
	onEachTransport(t, func(t *testing.T, tr string, s *session) {
		sb := s.create(nil)
		s.ok("write_file", map[string]any{"sandbox_id": sb.ID, "path": "/root/state.txt", "content": "kept"}, nil)
		// transition calls tool (its progress token is token) and wants
		// the sandbox in state after it, and as progress the call's
		// answer (going), then what the wait saw (state).
		transition := func(tool, token, going, state string) {
			t.Helper()
			var out sandboxOut
			s.ok(tool, map[string]any{"sandbox_id": sb.ID}, &out, token)
			if out.State != state {
				t.Fatalf("%s: %+v", token, out)
			}
			done := func(p []string) bool { return len(p) >= 2 && p[len(p)-1] == "sandbox "+sb.ID+" is "+state }
			if p := s.progress.until(token, done); !done(p) || p[0] != "sandbox "+sb.ID+" is "+going {
				t.Errorf("%s progress %q, want %s … %s", tool, p, going, state)
			}
		}
		transition("stop_sandbox", "stop", "stopping", "stopped")
		transition("start_sandbox", "start", "starting", "running")
		if res := s.ok("read_file", map[string]any{"sandbox_id": sb.ID, "path": "/root/state.txt"}, nil); text(res) != "kept" {
			t.Errorf("after stop and start the file has %q", text(res))
		}

		var snap struct{ ID, State string }
		s.ok("snapshot_sandbox", map[string]any{"sandbox_id": sb.ID, "name": "mcp"}, &snap, "snap")
		if !strings.HasPrefix(snap.ID, "snap_") || snap.State != "ready" {
			t.Fatalf("snapshot: %+v", snap)
		}
		t.Cleanup(func() { api().Sandboxes.DeleteSnapshot(context.Background(), snap.ID) })
		snapDone := func(p []string) bool {
			return len(p) >= 2 && p[0] == "snapshot of "+sb.ID+": started" && p[len(p)-1] == "snapshot of "+sb.ID+": done"
		}
		if p := s.progress.until("snap", snapDone); !snapDone(p) {
			t.Errorf("snapshot progress %q", p)
		}
		var fk struct {
			Sandboxes []sandboxOut
		}
		s.ok("fork_sandbox", map[string]any{"sandbox_id": sb.ID, "count": 2}, &fk, "fork")
		if len(fk.Sandboxes) != 2 {
			t.Fatalf("fork: %+v", fk)
		}
		forkDone := func(p []string) bool {
			return len(p) >= 2 && p[0] == "fork of "+sb.ID+": started" && p[len(p)-1] == "fork of "+sb.ID+": done"
		}
		if p := s.progress.until("fork", forkDone); !forkDone(p) {
			t.Errorf("fork progress %q", p)
		}
		for _, f := range fk.Sandboxes {
			t.Cleanup(func() { api().Sandboxes.Delete(context.Background(), f.ID) })
			if f.State != "running" || !f.CreatedByYou || f.Metadata[mcpserver.CreatedLabel] != mcpserver.CallerID(env.token) {
				t.Errorf("fork copy %+v", f)
			}
			if res := s.ok("read_file", map[string]any{"sandbox_id": f.ID, "path": "/root/state.txt"}, nil); text(res) != "kept" {
				t.Errorf("fork %s has %q", f.ID, text(res))
			}
			s.ok("delete_sandbox", map[string]any{"sandbox_id": f.ID}, nil)
		}
		var clone sandboxOut
		s.ok("create_sandbox", map[string]any{"from_snapshot": snap.ID}, &clone)
		t.Cleanup(func() { api().Sandboxes.Delete(context.Background(), clone.ID) })
		if res := s.ok("read_file", map[string]any{"sandbox_id": clone.ID, "path": "/root/state.txt"}, nil); text(res) != "kept" || !clone.CreatedByYou {
			t.Errorf("clone of the snapshot: %+v has %q", clone, text(res))
		}
	})
}

// TestDeleteGuard: delete_sandbox deletes only what the caller's own
// token made through MCP. Two tokens of one organization, A and B, on
// both transports: A cannot delete B's MCP sandbox, B's fork of A's, nor
// one made through /v1; B can delete its own and its fork; a sandbox made
// through pt mcp is deletable through /mcp with the same token; and
// `pt mcp --allow-delete-any` deletes the others.
func TestDeleteGuard(t *testing.T) {
	need(t)
	ctx := context.Background()
	_, tokB, err := api().Tokens.Create(ctx, platinum.CreateTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := api().Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"}, platinum.WaitForRunning(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api().Sandboxes.Delete(context.Background(), foreign.ID) })
	refused := func(t *testing.T, s *session, id, why string) {
		t.Helper()
		msg := s.fails("delete_sandbox", map[string]any{"sandbox_id": id})
		if !strings.HasPrefix(msg, "[forbidden] sandbox "+id+" "+why) || !strings.Contains(msg, "--allow-delete-any") {
			t.Errorf("delete of %s: %q, want [forbidden] … %s", id, msg, why)
		}
		if sb, err := api().Sandboxes.Get(ctx, id); err != nil || sb.State != platinum.StateRunning {
			t.Errorf("after the refused delete of %s: %+v, %v", id, sb, err)
		}
	}
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			a, b := connect(t, tr, env.token), connect(t, tr, tokB)
			ofA, ofB := a.create(nil), b.create(nil)
			if ofB.Metadata[mcpserver.CreatedLabel] != mcpserver.CallerID(tokB) || ofB.Metadata[mcpserver.CreatedLabel] == ofA.Metadata[mcpserver.CreatedLabel] {
				t.Fatalf("labels: A's %v, B's %v", ofA.Metadata, ofB.Metadata)
			}
			var seen sandboxOut
			a.ok("get_sandbox", map[string]any{"sandbox_id": ofB.ID}, &seen)
			if !seen.CreatedByMCP || seen.CreatedByYou {
				t.Errorf("A sees B's sandbox as %+v, want created_by_mcp and not created_by_you", seen)
			}
			var fk struct{ Sandboxes []sandboxOut }
			b.ok("fork_sandbox", map[string]any{"sandbox_id": ofA.ID}, &fk)
			if len(fk.Sandboxes) != 1 || !fk.Sandboxes[0].CreatedByYou {
				t.Fatalf("B's fork of A's sandbox: %+v", fk)
			}
			forkOfA := fk.Sandboxes[0].ID
			t.Cleanup(func() { api().Sandboxes.Delete(context.Background(), forkOfA) })

			refused(t, a, foreign.ID, "was not created through MCP")
			refused(t, a, ofB.ID, "was created through MCP with another token")
			refused(t, a, forkOfA, "was created through MCP with another token")
			refused(t, b, ofA.ID, "was created through MCP with another token")
			for _, id := range []string{forkOfA, ofB.ID} {
				b.ok("delete_sandbox", map[string]any{"sandbox_id": id}, nil)
				if !gone(id) {
					t.Errorf("B's delete of its own %s: /v1 still sees it live", id)
				}
			}
			a.ok("delete_sandbox", map[string]any{"sandbox_id": ofA.ID}, nil)
			if !gone(ofA.ID) {
				t.Errorf("A's delete of its own %s: /v1 still sees it live", ofA.ID)
			}
		})
	}

	// One token, two transports: the same caller.
	viaStdio := connect(t, "stdio", env.token).create(nil)
	connect(t, "http", env.token).ok("delete_sandbox", map[string]any{"sandbox_id": viaStdio.ID}, nil)
	if !gone(viaStdio.ID) {
		t.Errorf("/mcp did not delete what pt mcp made with the same token")
	}

	ofA := connect(t, "http", env.token).create(nil)
	s := connect(t, "stdio", tokB, "--allow-delete-any")
	for _, id := range []string{foreign.ID, ofA.ID} {
		s.ok("delete_sandbox", map[string]any{"sandbox_id": id}, nil)
		if !gone(id) {
			t.Errorf("with --allow-delete-any %s is still there", id)
		}
	}
}

// TestPtdAllowDeleteAny: a ptd started with --mcp-allow-delete-any lets
// /mcp's delete_sandbox delete what another token made through MCP and
// what was made through /v1; the tests' own ptd (without it) refuses
// both (TestDeleteGuard).
func TestPtdAllowDeleteAny(t *testing.T) {
	need(t)
	d := ptdtest.StartTest(t, ptdtest.Options{RepoRoot: env.root, ExtraArgs: append(slices.Clone(ptdArgs), "--mcp-allow-delete-any")}, 0)
	ctx := context.Background()
	c := platinum.New(d.URL, d.Token)
	_, tokB, err := c.Tokens.Create(ctx, platinum.CreateTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := c.Sandboxes.Create(ctx, platinum.CreateSandboxRequest{Template: "busybox"}, platinum.WaitForRunning(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var ofB sandboxOut
	dial(t, "http", d.URL, tokB).ok("create_sandbox", map[string]any{"template": "busybox"}, &ofB)
	a := dial(t, "http", d.URL, d.Token)
	for _, id := range []string{foreign.ID, ofB.ID} {
		var del struct{ ID, State string }
		a.ok("delete_sandbox", map[string]any{"sandbox_id": id}, &del)
		sb, err := c.Sandboxes.Get(ctx, id)
		if del.ID != id || !(platinum.IsNotFound(err) || err == nil && (sb.State == platinum.StateDeleting || sb.State == platinum.StateDeleted)) {
			t.Errorf("delete of %s through /mcp of a ptd with --mcp-allow-delete-any: %+v; /v1 sees %+v, %v", id, del, sb, err)
		}
	}
}

// TestOtherOrg: a token of another organization sees none of this org's
// sandboxes through MCP, on either transport; and an MCP session opened
// with one token refuses requests with any other (another org's, or
// another admin token of the same org) with 403, while it keeps working
// for its owner.
func TestOtherOrg(t *testing.T) {
	need(t)
	ctx := context.Background()
	_, otherTok, err := api().Orgs.Create(ctx, "mcp-other-"+ptdtest.RandHex(3))
	if err != nil {
		t.Fatal(err)
	}
	_, sameOrgTok, err := api().Tokens.Create(ctx, platinum.CreateTokenRequest{Role: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	mine := connect(t, "http", env.token).create(nil)
	for _, tr := range transports {
		s := connect(t, tr, otherTok)
		var l struct {
			Sandboxes []sandboxOut
			Total     int
		}
		s.ok("list_sandboxes", nil, &l)
		if l.Total != 0 || len(l.Sandboxes) != 0 {
			t.Errorf("%s: the other org lists %+v", tr, l)
		}
		for _, tool := range []string{"get_sandbox", "delete_sandbox"} {
			if msg := s.fails(tool, map[string]any{"sandbox_id": mine.ID}); !strings.HasPrefix(msg, "[not_found]") {
				t.Errorf("%s: %s of another org's sandbox: %q", tr, tool, msg)
			}
		}
		if msg := s.fails("exec", map[string]any{"sandbox_id": mine.ID, "command": "id"}); !strings.HasPrefix(msg, "[not_found]") {
			t.Errorf("%s: exec in another org's sandbox: %q", tr, msg)
		}
		if _, err := s.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "platinum://sandboxes/" + mine.ID + "/files/etc/hostname"}); err == nil {
			t.Errorf("%s: the other org read a file resource of this org's sandbox", tr)
		}
	}

	// Raw HTTP: no token is 401 in /v1's error shape; a session opened
	// with one token refuses requests with another.
	r := rawMCP(t, "", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if r.status != 401 || !strings.Contains(r.body, `"code":"unauthorized"`) {
		t.Errorf("no token: %d %s", r.status, r.body)
	}
	init := rawMCP(t, env.token, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := init.header.Get("Mcp-Session-Id")
	if init.status != 200 || sid == "" {
		t.Fatalf("initialize: %d %v %s", init.status, init.header, init.body)
	}
	if r := rawMCP(t, env.token, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", r.status, r.body)
	}
	const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for _, tok := range []string{otherTok, sameOrgTok} {
		if r := rawMCP(t, tok, sid, list); r.status != http.StatusForbidden || strings.TrimSpace(r.body) != "session user mismatch" {
			t.Errorf("another token on the session: %d %q, want 403 session user mismatch", r.status, r.body)
		}
	}
	// The owner's session still works, before and after the attempts.
	if r := rawMCP(t, env.token, sid, list); r.status != http.StatusOK || !strings.Contains(r.body, `"create_sandbox"`) {
		t.Errorf("the owner on its own session: %d %s", r.status, r.body)
	}
	if r := rawMCP(t, otherTok, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"delete_sandbox","arguments":{"sandbox_id":"`+mine.ID+`"}}}`); r.status != http.StatusForbidden {
		t.Errorf("a tool call with another token on the session: %d %s", r.status, r.body)
	}
	if sb, err := api().Sandboxes.Get(ctx, mine.ID); err != nil || sb.State != platinum.StateRunning {
		t.Errorf("after the takeover attempts: %+v, %v", sb, err)
	}
}

type rawResp struct {
	status int
	header http.Header
	body   string
}

func rawMCP(t *testing.T, token, session, body string) rawResp {
	t.Helper()
	req, _ := http.NewRequest("POST", env.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return rawResp{resp.StatusCode, resp.Header, string(b)}
}

// TestCancel: cancelling a tool call cancels its /v1 request, so the
// command it ran in the sandbox is killed, on both transports.
func TestCancel(t *testing.T) {
	need(t)
	onEachTransport(t, func(t *testing.T, tr string, s *session) {
		sb := s.create(nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan *mcp.CallToolResult, 1)
		errc := make(chan error, 1)
		go func() {
			res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{
				"sandbox_id": sb.ID, "command": "echo $$ > /tmp/long.pid; exec sleep 300", "timeout_seconds": 600}})
			done <- res
			errc <- err
		}()
		pid := waitPID(t, sb.ID, "/tmp/long.pid")
		if !alive(t, sb.ID, pid) {
			t.Fatalf("sleep %d is not running before the cancel", pid)
		}
		cancel()
		select {
		case res := <-done:
			if err := <-errc; err == nil {
				t.Errorf("cancelled call returned %+v, no error", res)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("cancelled call did not return")
		}
		deadline := time.Now().Add(30 * time.Second)
		for alive(t, sb.ID, pid) {
			if time.Now().After(deadline) {
				t.Fatalf("sleep %d still runs after the call was cancelled", pid)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}

func waitPID(t *testing.T, id, file string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		res, err := api().Sandboxes.Exec(context.Background(), id, platinum.ExecRequest{Shell: "cat " + file + " 2>/dev/null"})
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(res.Stdout)); err == nil {
				return pid
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", file)
	return 0
}

func alive(t *testing.T, id string, pid int) bool {
	t.Helper()
	res, err := api().Sandboxes.Exec(context.Background(), id, platinum.ExecRequest{Shell: fmt.Sprintf("kill -0 %d", pid)})
	if err != nil {
		t.Fatal(err)
	}
	return res.ExitCode == 0
}

// TestNodeSDK runs sdk.test.mjs: the official @modelcontextprotocol/sdk
// client (pinned by package-lock.json; scripts/test.sh runs npm ci) over
// Streamable HTTP against the same ptd.
func TestNodeSDK(t *testing.T) {
	need(t)
	node := testenv.RequiresNode(t, ".", "@modelcontextprotocol/sdk")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "sdk.test.mjs")
	cmd.Env = append(os.Environ(), "PT_API_URL="+env.url, "PT_TOKEN="+env.token)
	runnercheck.Run(t, "node --test", cmd, nil)
}

// TestProjectToken: a project-scoped token sees and creates only its
// project's sandboxes through MCP, as on /v1.
func TestProjectToken(t *testing.T) {
	need(t)
	ctx := context.Background()
	prj, err := api().Projects.Create(ctx, "mcp-"+ptdtest.RandHex(3))
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := api().Tokens.Create(ctx, platinum.CreateTokenRequest{ProjectID: prj.ID})
	if err != nil {
		t.Fatal(err)
	}
	outside := connect(t, "http", env.token).create(nil)
	for _, tr := range transports {
		s := connect(t, tr, tok)
		inside := s.create(nil)
		if got, err := api().Sandboxes.Get(ctx, inside.ID); err != nil || got.ProjectID != prj.ID {
			t.Fatalf("%s: the project token's sandbox %+v, %v, want project %s", tr, got, err, prj.ID)
		}
		var l struct{ Sandboxes []sandboxOut }
		s.ok("list_sandboxes", nil, &l)
		if slices.ContainsFunc(l.Sandboxes, func(x sandboxOut) bool { return x.ID == outside.ID }) ||
			!slices.ContainsFunc(l.Sandboxes, func(x sandboxOut) bool { return x.ID == inside.ID }) {
			t.Errorf("%s: project token lists %+v", tr, l.Sandboxes)
		}
		if msg := s.fails("get_sandbox", map[string]any{"sandbox_id": outside.ID}); !strings.HasPrefix(msg, "[not_found]") {
			t.Errorf("%s: a sandbox outside the project: %q", tr, msg)
		}
	}
}

// TestSandboxToken: a sandbox's own token (its PT_TOKEN) sees through MCP
// only what it sees on /v1: that sandbox's children, none of the org's
// other sandboxes.
func TestSandboxToken(t *testing.T) {
	need(t)
	admin := connect(t, "http", env.token)
	parent := admin.create(nil)
	other := admin.create(nil)
	var ex struct {
		Stdout string `json:"stdout"`
	}
	admin.ok("exec", map[string]any{"sandbox_id": parent.ID, "command": "printf %s \"$PT_TOKEN\""}, &ex)
	if ex.Stdout == "" {
		t.Fatal("the sandbox has no PT_TOKEN")
	}
	for _, tr := range transports {
		s := connect(t, tr, ex.Stdout)
		var l struct {
			Sandboxes []sandboxOut
			Total     int
		}
		s.ok("list_sandboxes", nil, &l)
		if l.Total != 0 {
			t.Errorf("%s: a childless sandbox's token lists %+v", tr, l.Sandboxes)
		}
		if msg := s.fails("get_sandbox", map[string]any{"sandbox_id": other.ID}); !strings.HasPrefix(msg, "[not_found]") {
			t.Errorf("%s: another sandbox of the org: %q", tr, msg)
		}
		child := s.create(nil)
		got, err := api().Sandboxes.Get(context.Background(), child.ID)
		if err != nil || got.ParentID != parent.ID {
			t.Fatalf("%s: the sandbox token's create %+v, %v; want a child of %s", tr, got, err, parent.ID)
		}
		s.ok("list_sandboxes", nil, &l)
		if len(l.Sandboxes) != 1 || l.Sandboxes[0].ID != child.ID {
			t.Errorf("%s: after one create the sandbox token lists %+v", tr, l.Sandboxes)
		}
		s.ok("delete_sandbox", map[string]any{"sandbox_id": child.ID}, nil)
	}
}

// TestRunCode runs cells in a code-interpreter sandbox on each transport:
// state kept across calls, a matplotlib figure as image content (a real
// PNG), a raised error with its traceback and the context still working,
// and a bad language refused naming the argument.
func TestRunCode(t *testing.T) {
	need(t)
	onEachTransport(t, func(t *testing.T, tr string, s *session) {
		var sb sandboxOut
		s.ok("create_sandbox", map[string]any{"template": "code-interpreter"}, &sb)
		t.Cleanup(func() { api().Sandboxes.Delete(context.Background(), sb.ID) })

		type out struct {
			Stdout  string `json:"stdout"`
			Results []struct {
				Text         string   `json:"text"`
				Formats      []string `json:"formats"`
				IsMainResult bool     `json:"is_main_result"`
			} `json:"results"`
			Error  *struct{ Name, Value, Traceback string } `json:"error"`
			Status string                                   `json:"status"`
		}
		var o out
		s.ok("run_code", map[string]any{"sandbox_id": sb.ID, "code": "x = 41\nprint('set')"}, &o)
		if o.Stdout != "set\n" || o.Error != nil {
			t.Fatalf("first cell: %+v", o)
		}
		o = out{}
		s.ok("run_code", map[string]any{"sandbox_id": sb.ID, "code": "x + 1"}, &o)
		if len(o.Results) != 1 || o.Results[0].Text != "42" || !o.Results[0].IsMainResult {
			t.Fatalf("x + 1 in the same context: %+v", o)
		}

		res := s.ok("run_code", map[string]any{"sandbox_id": sb.ID, "code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"}, nil)
		var png []byte
		for _, c := range res.Content {
			if ic, ok := c.(*mcp.ImageContent); ok && ic.MIMEType == "image/png" {
				png = ic.Data
			}
		}
		if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("plot: no PNG image content (%d bytes) in %d content parts", len(png), len(res.Content))
		}

		o = out{}
		s.ok("run_code", map[string]any{"sandbox_id": sb.ID, "code": "1/0"}, &o)
		if o.Error == nil || o.Error.Name != "ZeroDivisionError" || !strings.Contains(o.Error.Traceback, "ZeroDivisionError") {
			t.Fatalf("1/0: %+v", o)
		}
		o = out{}
		s.ok("run_code", map[string]any{"sandbox_id": sb.ID, "code": "x * 2"}, &o)
		if len(o.Results) != 1 || o.Results[0].Text != "82" {
			t.Fatalf("after the error the context keeps x: %+v", o)
		}

		if msg := s.fails("run_code", map[string]any{"sandbox_id": sb.ID, "code": "1", "language": "cobol"}); !strings.Contains(msg, "language") {
			t.Errorf("bad language: %q does not name the argument", msg)
		}
	})
}
