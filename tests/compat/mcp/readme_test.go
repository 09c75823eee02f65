package mcpcompat

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReadmeConfig: the README's three-line mcpServers block, with this
// ptd's URL and a token in place of the placeholders, is what an agent
// host needs: the command it names, run as the host would, serves the
// tools.
func TestReadmeConfig(t *testing.T) {
	need(t)
	b, err := os.ReadFile(filepath.Join(env.root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## MCP")
	if !ok {
		t.Fatal("README has no MCP section")
	}
	block := regexp.MustCompile("(?s)```json\n(.*?)```").FindStringSubmatch(section)
	if block == nil {
		t.Fatal("README's MCP section has no json block")
	}
	if n := strings.Count(strings.TrimSpace(block[1]), "\n") + 1; n != 3 {
		t.Errorf("the README's MCP config is %d lines, not three", n)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(block[1]), &cfg); err != nil {
		t.Fatalf("the README's MCP config is not JSON: %v\n%s", err, block[1])
	}
	srv, ok := cfg.MCPServers["platinum"]
	if !ok || srv.Command != "pt" || !slices.Equal(srv.Args, []string{"mcp"}) {
		t.Fatalf("README's server: %+v", cfg)
	}
	var keys []string
	for k := range srv.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"PT_API_URL", "PT_TOKEN"}) {
		t.Fatalf("README's env %v, want PT_API_URL and PT_TOKEN", keys)
	}
	// As a host runs it: the command (here the pt just built) with the
	// args and only the env the config gives, its values filled in.
	cmd := exec.Command(filepath.Join(env.binDir, srv.Command), srv.Args...)
	cmd.Env = []string{"PT_API_URL=" + env.url, "PT_TOKEN=" + env.token}
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "readme-host", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("start %s %v: %v", srv.Command, srv.Args, err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_sandboxes", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_sandboxes through the README's config: %+v, %v", res, err)
	}
}
