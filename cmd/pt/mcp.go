package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/platinum-dev/platinum/mcpserver"
	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// mcpCmd is `pt mcp`: the MCP server on stdin/stdout, for agent hosts that
// start their tools as subprocesses (docs/mcp.md). It talks to the ptd at
// PT_API_URL with PT_TOKEN, like every other verb.
type mcpCmd struct{ app *app }

const mcpSynopsis = "pt mcp [--allow-delete-any]"

// bind binds the flags; the returned run serves MCP until stdin closes or pt
// is interrupted. stdout carries only protocol messages; the SDK's log lines
// go to stderr.
func (c *mcpCmd) bind(fs *flag.FlagSet) runFunc {
	anyDelete := fs.Bool("allow-delete-any", false, "let delete_sandbox delete sandboxes this token did not make through MCP (by default it refuses those whose "+mcpserver.CreatedLabel+" label is not this token's)")
	return callRun(c.app, noArgs, func(ctx context.Context, cl *platinum.Client, _ []string) (struct{}, error) {
		log := slog.New(slog.NewTextHandler(c.app.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		// client() has checked PT_TOKEN is set.
		s := mcpserver.New(cl, mcpserver.Options{CallerID: mcpserver.CallerID(c.app.getenv("PT_TOKEN")), AllowDeleteAny: *anyDelete, Logger: log})
		t := &mcp.IOTransport{Reader: io.NopCloser(c.app.stdin), Writer: nopWriteCloser{c.app.stdout}}
		if err := s.Run(ctx, t); err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
			return struct{}{}, err
		}
		return struct{}{}, nil
	}, noOutput)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
