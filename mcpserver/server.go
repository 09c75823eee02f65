// Package mcpserver is Platinum's Model Context Protocol server: tools,
// resources and progress notifications that let an AI agent create and
// drive sandboxes (see docs/mcp.md). Every tool call is a call of the Go
// SDK (sdk/go), so it goes through /v1 with the caller's token and sees
// exactly what that token sees there. Two transports use it: `pt mcp`
// (stdio) and ptd's /mcp (Streamable HTTP, http.go). It is not under
// internal/ because pt, a client of public packages only, serves it too;
// it imports nothing of ptd's (a guard-rail test checks).
package mcpserver

import (
	"context"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// CreatedLabel is the metadata key create_sandbox sets (to "1") on every
// sandbox it makes. delete_sandbox deletes only sandboxes that carry it
// unless Options.AllowDeleteAny: the label lives in the sandbox's record,
// so it holds across MCP sessions, HTTP requests and ptd restarts without
// any state in the server, and a model cannot forge it (no tool edits
// metadata, and create_sandbox sets it whatever the model passed).
const CreatedLabel = "pt_mcp_created"

// Version is the server version announced in the MCP handshake.
const Version = platinum.Version

// Options configure a Server.
type Options struct {
	// AllowDeleteAny lets delete_sandbox delete sandboxes this server did
	// not create (pt mcp --allow-delete-any).
	AllowDeleteAny bool
	// Logger receives the MCP SDK's own log lines; nil discards them.
	Logger *slog.Logger
}

// New returns an MCP server whose tools and resources call ptd through c,
// for one caller (pt mcp).
func New(c *platinum.Client, o Options) *mcp.Server {
	return newServer(&tools{c: c, allowDeleteAny: o.AllowDeleteAny}, o)
}

// NewShared returns one MCP server for many callers: each tool call and
// resource read uses the client clientFor makes from the request that
// carried it (its Authorization header, for ptd's /mcp). One server for
// all sessions, because the SDK's Streamable HTTP handler asks for the
// server on every request, not only when a session starts.
func NewShared(clientFor func(*mcp.RequestExtra) *platinum.Client, o Options) *mcp.Server {
	return newServer(&tools{clientFor: clientFor, allowDeleteAny: o.AllowDeleteAny}, o)
}

func newServer(t *tools, o Options) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "platinum", Title: "Platinum sandboxes", Version: Version},
		&mcp.ServerOptions{Instructions: instructions, Logger: o.Logger})
	t.register(s)
	registerResources(s, t)
	return s
}

// instructions is what the server tells the model about itself in the
// handshake.
const instructions = `Platinum runs isolated Linux sandboxes (containers with their own disk, network and processes).
Typical flow: create_sandbox (template "busybox" is tiny and instant, "pt-base" is Debian, "python-node" has Python 3 and Node),
then exec commands, write_file / read_file / list_files, preview_url to reach a server listening on a port,
and delete_sandbox when done. Sandbox files are also resources, by absolute path: platinum://sandboxes/<id>/files/etc/hostname.
Errors name the API's error code in brackets, e.g. [not_found] or [invalid_request].`

// background is the context for clean-up that must outlive a cancelled
// call (deleting a sandbox whose create was cancelled).
func background(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
