package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/ptdtest"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

var (
	mcpRuns = flag.Int("mcp-runs", 50, "runs of the MCP bench: exec and get_sandbox through /mcp and pt mcp against /v1 (0 skips it)")
	mcpOnly = flag.Bool("mcp-only", false, "run only the MCP bench")
)

// mcpBench measures what MCP adds to a tool call: exec of `true` and
// get_sandbox through ptd's /mcp (Streamable HTTP, /v1 in-process) and
// through `pt mcp` (stdio, /v1 over loopback), each against the same /v1
// call made directly (the baseline), interleaved one of each in turn so
// all see the same load. The exec tool streams (so neither ptd nor the
// MCP server holds a command's whole output): the streamed /v1 exec is
// measured beside the buffered baseline to tell the two costs apart.
func mcpBench(c *benchkit.Client, d *ptdtest.Daemon, runs int) error {
	id, err := c.EnsureCreate("busybox")
	if err != nil {
		return err
	}
	defer c.Delete(id)
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "platinum-bench", Version: "1"}, nil)
	httpS, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: d.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearerRT(d.Token)}}, nil)
	if err != nil {
		return fmt.Errorf("connect /mcp: %w", err)
	}
	defer httpS.Close()
	cmd := exec.Command(filepath.Join(d.BinDir, "pt"), "mcp")
	cmd.Env = []string{"PT_API_URL=" + d.URL, "PT_TOKEN=" + d.Token}
	stdioS, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("connect pt mcp: %w", err)
	}
	defer stdioS.Close()

	type series struct{ v1, stream, http, stdio []time.Duration }
	var ex, get series
	sdk := platinum.New(d.URL, d.Token)
	call := func(s *mcp.ClientSession, name string, args map[string]any) (time.Duration, error) {
		t0 := time.Now()
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		d := time.Since(t0)
		if err == nil && res.IsError {
			err = fmt.Errorf("%s: tool error %v", name, res.Content)
		}
		return d, err
	}
	timed := func(f func() error) (time.Duration, error) {
		t0 := time.Now()
		err := f()
		return time.Since(t0), err
	}
	execArgs := map[string]any{"sandbox_id": id, "command": "true"}
	getArgs := map[string]any{"sandbox_id": id}
	for i := 0; i < runs; i++ {
		dv, err := timed(func() error { _, err := c.Exec(id, []string{"/bin/sh", "-c", "true"}); return err })
		if err != nil {
			return err
		}
		// exec streams (NDJSON), as the tool does.
		dst, err := timed(func() error {
			_, err := sdk.Sandboxes.ExecStream(ctx, id, platinum.ExecRequest{Shell: "true"}, nil, nil)
			return err
		})
		if err != nil {
			return err
		}
		dh, err := call(httpS, "exec", execArgs)
		if err != nil {
			return err
		}
		ds, err := call(stdioS, "exec", execArgs)
		if err != nil {
			return err
		}
		ex.v1, ex.stream, ex.http, ex.stdio = append(ex.v1, dv), append(ex.stream, dst), append(ex.http, dh), append(ex.stdio, ds)

		dv, err = timed(func() error {
			st, b, err := c.Do("GET", "/v1/sandboxes/"+id, nil)
			if err == nil && st != 200 {
				err = fmt.Errorf("get: %d %s", st, b)
			}
			return err
		})
		if err != nil {
			return err
		}
		if dh, err = call(httpS, "get_sandbox", getArgs); err != nil {
			return err
		}
		if ds, err = call(stdioS, "get_sandbox", getArgs); err != nil {
			return err
		}
		get.v1, get.http, get.stdio = append(get.v1, dv), append(get.http, dh), append(get.stdio, ds)
	}
	fmt.Printf("MCP (%d runs each, interleaved)\n", runs)
	benchkit.Report("/v1 exec of sh -c true (baseline)", ex.v1, nil)
	benchkit.Report("/v1 exec of sh -c true, streamed", ex.stream, ex.v1)
	benchkit.Report("MCP exec over /mcp", ex.http, ex.v1)
	benchkit.Report("MCP exec over pt mcp (stdio)", ex.stdio, ex.v1)
	benchkit.Report("/v1 GET sandbox (baseline)", get.v1, nil)
	benchkit.Report("MCP get_sandbox over /mcp", get.http, get.v1)
	benchkit.Report("MCP get_sandbox over pt mcp (stdio)", get.stdio, get.v1)
	return nil
}

type bearerRT string

func (t bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(t))
	return http.DefaultTransport.RoundTrip(r)
}
