package mcpcompat

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/platinum-dev/platinum/internal/ptdtest"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// TestCreateEnvNetwork: create_sandbox's env reaches every command in the
// sandbox, and its network policy is enforced: with egress deny and one
// address in allow_out, the sandbox reaches that address and not another,
// which a sandbox with the default policy reaches. The "internet" is a
// network namespace the test makes (ptdtest.Outside).
func TestCreateEnvNetwork(t *testing.T) {
	need(t)
	out := ptdtest.NewOutside(t, "ptmcp", 2)
	ln0, ln1 := out.Listen(t, out.Addrs[0].String()+":9000"), out.Listen(t, out.Addrs[1].String()+":9000")
	for _, ln := range []net.Listener{ln0, ln1} {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprintf(c, "hi %s\n", strings.Split(c.LocalAddr().String(), ":")[0])
				c.Close()
			}
		}()
	}
	allowed, denied := out.Addrs[0].String(), out.Addrs[1].String()
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			s := connect(t, tr, env.token)
			sb := s.create(map[string]any{
				"env":     map[string]any{"GREETING": "from-create", "MCP_TRANSPORT": tr},
				"network": map[string]any{"egress": "deny", "allow_out": []any{allowed + "/32"}},
			})
			if got := strings.Join(sb.EnvKeys, ","); got != "GREETING,MCP_TRANSPORT" {
				t.Errorf("env_keys %q", got)
			}
			var ex struct {
				ExitCode int    `json:"exit_code"`
				Stdout   string `json:"stdout"`
			}
			s.ok("exec", map[string]any{"sandbox_id": sb.ID, "command": "echo $GREETING $MCP_TRANSPORT"}, &ex)
			if ex.Stdout != "from-create "+tr+"\n" {
				t.Errorf("the sandbox's env: %q", ex.Stdout)
			}
			// /v1 agrees about the policy it stored.
			if nw, err := api().Sandboxes.Get(context.Background(), sb.ID); err != nil || nw.Network == nil || nw.Network.Egress != "deny" {
				t.Errorf("/v1 network of %s: %+v, %v", sb.ID, nw, err)
			}
			nc := func(id, addr string) (int, string) {
				s.ok("exec", map[string]any{"sandbox_id": id, "command": "nc -w 3 " + addr + " 9000", "timeout_seconds": 20}, &ex)
				return ex.ExitCode, ex.Stdout
			}
			if code, got := nc(sb.ID, allowed); code != 0 || got != "hi "+allowed+"\n" {
				t.Errorf("allow_out %s: exit %d, %q", allowed, code, got)
			}
			if code, got := nc(sb.ID, denied); code == 0 || strings.Contains(got, "hi") {
				t.Errorf("egress deny let %s through: exit %d, %q", denied, code, got)
			}
			open := s.create(nil)
			if code, got := nc(open.ID, denied); code != 0 || got != "hi "+denied+"\n" {
				t.Errorf("the default policy does not reach %s (so the deny proves nothing): exit %d, %q", denied, code, got)
			}
		})
	}
}

// TestAPIFieldErrors: arguments the tool's schema lets through but /v1
// itself refuses come back as tool errors with the API's code, naming the
// tool's argument (the API's ttl_ms is the tool's ttl_seconds), and
// create nothing.
func TestAPIFieldErrors(t *testing.T) {
	need(t)
	ctx := context.Background()
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			s := connect(t, tr, env.token)
			mark := map[string]any{"case": "api-field-error-" + tr}
			for _, c := range []struct {
				args      map[string]any
				code, arg string
			}{
				// The tests' ptd has --max-create-ttl 30m; the schema allows 3600 s.
				{map[string]any{"ttl_seconds": 2400}, "sandbox_ttl_exceeded", "ttl_seconds"},
				{map[string]any{"env": map[string]any{"1BAD": "x"}}, "invalid_request", "env"},
				{map[string]any{"network": map[string]any{"egress": "deny", "deny_out": []any{"example.com"}}}, "invalid_request", "network.deny_out"},
			} {
				c.args["template"], c.args["metadata"] = "busybox", mark
				msg := s.fails("create_sandbox", c.args)
				if !strings.HasPrefix(msg, "["+c.code+"] ") || !strings.HasSuffix(msg, fmt.Sprintf("(argument %q)", c.arg)) {
					t.Errorf("create_sandbox(%v): %q, want [%s] … (argument %q)", c.args, msg, c.code, c.arg)
				}
			}
			l, err := api().Sandboxes.List(ctx, platinum.ListOptions{Metadata: map[string]string{"case": "api-field-error-" + tr}})
			if err != nil || l.Total != 0 {
				t.Errorf("refused creates made sandboxes: %+v, %v", l, err)
			}
		})
	}
}

// TestTemplateBuildProgress: against a real template build (pt-base is
// rebuilt, from the shared cache when it has it), create_sandbox reports
// the build in its progress notifications until the sandbox runs; and a
// create cancelled while the template builds deletes its sandbox, which
// nobody else learnt the ID of.
func TestTemplateBuildProgress(t *testing.T) {
	need(t)
	ctx := context.Background()
	// building starts a build of pt-base unless one runs, and returns once
	// /v1 says the template is building.
	building := func(t *testing.T) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			tpl, err := api().Templates.Get(ctx, "pt-base")
			if err == nil && tpl.Status == platinum.TemplateBuilding {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("pt-base never building: %+v, %v", tpl, err)
			}
			if _, err := api().Templates.Build(ctx, "pt-base"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	isBuild := func(m string) bool { return strings.HasPrefix(m, "building template pt-base: ") }
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			s := connect(t, tr, env.token)

			// Cancelled while the template builds: the sandbox goes.
			building(t)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			p := &mcp.CallToolParams{Name: "create_sandbox", Arguments: map[string]any{"template": "pt-base"}}
			p.SetProgressToken("cancelled")
			errc := make(chan error, 1)
			go func() {
				_, err := s.cs.CallTool(cctx, p)
				errc <- err
			}()
			sawBuild := func(m []string) bool { return len(m) >= 2 && isBuild(m[len(m)-1]) }
			msgs := s.progress.until("cancelled", sawBuild)
			if !sawBuild(msgs) {
				t.Fatalf("progress while pt-base builds: %q", msgs)
			}
			var id string
			if _, err := fmt.Sscanf(msgs[0], "sandbox %s created from pt-base, booting", &id); err != nil {
				t.Fatalf("first progress %q: %v", msgs[0], err)
			}
			t.Cleanup(func() { api().Sandboxes.Delete(context.Background(), id) })
			if sb, err := api().Sandboxes.Get(ctx, id); err != nil || sb.State != platinum.StateCreating {
				t.Fatalf("before the cancel /v1 sees %+v, %v", sb, err)
			}
			cancel()
			if err := <-errc; err == nil {
				t.Error("the cancelled create returned no error")
			}
			deadline := time.Now().Add(30 * time.Second)
			for !gone(id) {
				if time.Now().After(deadline) {
					t.Fatalf("the cancelled create's sandbox %s is still there", id)
				}
				time.Sleep(100 * time.Millisecond)
			}

			// Followed to the end: the build, then running.
			building(t)
			var sb sandboxOut
			s.ok("create_sandbox", map[string]any{"template": "pt-base"}, &sb, "built")
			t.Cleanup(func() { api().Sandboxes.Delete(context.Background(), sb.ID) })
			done := func(m []string) bool { return len(m) > 0 && m[len(m)-1] == "sandbox "+sb.ID+" is running" }
			msgs = s.progress.until("built", done)
			builds := 0
			for _, m := range msgs {
				if isBuild(m) {
					builds++
				}
			}
			if sb.State != "running" || !done(msgs) || builds == 0 || msgs[0] != "sandbox "+sb.ID+" created from pt-base, booting" {
				t.Errorf("create of %+v while pt-base builds: progress %q", sb, msgs)
			}
		})
	}
}
