package main

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/platinum-dev/platinum/mcpserver"
	"github.com/platinum-dev/platinum/sdk/go/platinumtest"
)

// ptMCP runs `pt mcp args…` on pipes against ptd with PT_TOKEN token
// and returns a connected MCP client and a function that closes the
// client (pt's stdin) and returns pt's exit code and stderr.
func ptMCP(t *testing.T, srv *platinumtest.Server, token string, args ...string) (*mcp.ClientSession, func() (int, string)) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr strings.Builder
	a := &app{
		stdout: outW, stderr: &stderr, stdin: inR,
		getenv:       func(k string) string { return map[string]string{"PT_API_URL": srv.URL, "PT_TOKEN": token}[k] },
		pollInterval: time.Millisecond,
	}
	code := make(chan int, 1)
	go func() {
		c := a.run(t.Context(), append([]string{"mcp"}, args...))
		outW.Close()
		code <- c
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "pt-test", Version: "1"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect to pt mcp: %v", err)
	}
	return cs, func() (int, string) {
		cs.Close()
		inW.Close()
		select {
		case c := <-code:
			return c, stderr.String()
		case <-time.After(10 * time.Second):
			t.Fatal("pt mcp did not end when its stdin closed")
			return -1, ""
		}
	}
}

// TestMCP: `pt mcp` serves the tools on stdin/stdout with PT_API_URL and
// PT_TOKEN, labels what it creates with its token's caller ID, deletes
// only that unless --allow-delete-any, and ends cleanly when stdin
// closes.
func TestMCP(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	r := runPT(t, srv.URL, platinumtest.AdminToken, "", nil, "sandbox", "create", "-t", "busybox",
		"--metadata", mcpserver.CreatedLabel+"="+mcpserver.CallerID(platinumtest.AdminToken))
	if r.code != 0 {
		t.Fatalf("create the other token's sandbox: exit %d stderr %q", r.code, r.stderr)
	}
	other := created(t, srv, r.stdout).ID
	cs, stop := ptMCP(t, srv, platinumtest.Token)
	ctx := t.Context()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "create_sandbox") || !slices.Contains(names, "delete_sandbox") || len(names) != 14 {
		t.Errorf("tools %v", names)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_sandbox", Arguments: map[string]any{"template": "busybox"}})
	if err != nil || res.IsError {
		t.Fatalf("create_sandbox: %+v, %v", res, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var made struct {
		ID           string `json:"id"`
		CreatedByYou bool   `json:"created_by_you"`
	}
	json.Unmarshal(b, &made)
	sb, ok := srv.Sandbox(made.ID)
	if !ok || !made.CreatedByYou || sb.Metadata[mcpserver.CreatedLabel] != mcpserver.CallerID(platinumtest.Token) {
		t.Fatalf("created %s: %+v (ptd has %+v)", b, made, sb.Metadata)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_sandbox", Arguments: map[string]any{"sandbox_id": other}})
	if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "[forbidden]") {
		t.Errorf("delete of another token's sandbox: %+v, %v", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_sandbox", Arguments: map[string]any{"sandbox_id": made.ID}})
	if err != nil || res.IsError {
		t.Errorf("delete of its own sandbox: %+v, %v", res, err)
	}
	if code, stderr := stop(); code != 0 {
		t.Errorf("pt mcp exited %d when stdin closed: %s", code, stderr)
	}
	if sb, _ := srv.Sandbox(other); sb.State != "running" {
		t.Errorf("the other token's sandbox is %s", sb.State)
	}

	cs, stop = ptMCP(t, srv, platinumtest.Token, "--allow-delete-any")
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_sandbox", Arguments: map[string]any{"sandbox_id": other}})
	if err != nil || res.IsError {
		t.Errorf("delete with --allow-delete-any: %+v, %v", res, err)
	}
	if code, stderr := stop(); code != 0 {
		t.Errorf("pt mcp --allow-delete-any exited %d: %s", code, stderr)
	}
}

// TestMCPUsage: pt mcp refuses arguments and a missing PT_TOKEN before it
// serves anything on stdout, which belongs to the protocol.
func TestMCPUsage(t *testing.T) {
	t.Parallel()
	srv := platinumtest.NewServer(t)
	r := ptdRun(t, srv, "", nil, "mcp", "serve")
	if r.code != 2 || !strings.Contains(r.stderr, `unexpected argument "serve"`) || !strings.Contains(r.stderr, "pt mcp [--allow-delete-any]") || r.stdout != "" {
		t.Errorf("pt mcp serve: %+v", r)
	}
	r = ptdRun(t, srv, "", map[string]string{"PT_TOKEN": ""}, "mcp")
	if r.code == 0 || !strings.Contains(r.stderr, "PT_TOKEN") || r.stdout != "" {
		t.Errorf("pt mcp without PT_TOKEN: %+v", r)
	}
	if len(srv.Requests()) != 0 {
		t.Errorf("refused invocations called the API: %v", srv.Requests())
	}
}
