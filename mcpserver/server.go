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
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// CreatedLabel is the metadata key under which create_sandbox and
// fork_sandbox record who made a sandbox: the CallerID of the token the
// call carried. delete_sandbox deletes only sandboxes whose label is the
// caller's own unless Options.AllowDeleteAny, so one agent cannot delete
// what another agent (or a person, or a program) made, even in the same
// organization. The label lives in the sandbox's record, so it holds
// across MCP sessions, HTTP requests, pt mcp processes and ptd restarts
// without any state in the server; a model cannot forge it (no tool edits
// metadata, and create_sandbox and fork_sandbox set it whatever the model
// passed).
const CreatedLabel = "pt_mcp_created"

// CallerID is the identity the label records for the caller whose bearer
// token is token: "tfp_" and 32 hex digits of SHA-256 over a fixed prefix
// and the token. Both transports derive it the same way, so a sandbox made
// through `pt mcp` with a token is deletable through /mcp with the same
// token; any other token has another ID; and the token cannot be learnt
// from it (the metadata is visible to the whole organization). It is not
// the token's own ID (tok_…) because pt, a client, has no way to learn
// that.
func CallerID(token string) string {
	// Trimmed as ptd trims a bearer token, so both transports agree.
	h := sha256.Sum256([]byte("platinum mcp caller\x00" + strings.TrimSpace(token)))
	return "tfp_" + hex.EncodeToString(h[:16])
}

// Version is the server version announced in the MCP handshake.
const Version = platinum.Version

// Options configure a Server.
type Options struct {
	// CallerID identifies the caller New's tools act for (CallerID of its
	// token): create_sandbox and fork_sandbox record it, delete_sandbox
	// deletes only sandboxes that carry it. Empty, delete_sandbox deletes
	// nothing without AllowDeleteAny. NewShared ignores it (each call has
	// its own caller).
	CallerID string
	// AllowDeleteAny lets delete_sandbox delete sandboxes this caller did
	// not create (pt mcp --allow-delete-any, ptd serve
	// --mcp-allow-delete-any).
	AllowDeleteAny bool
	// Logger receives the MCP SDK's own log lines; nil discards them.
	Logger *slog.Logger
}

// New returns an MCP server whose tools and resources call ptd through c,
// for one caller (pt mcp).
func New(c *platinum.Client, o Options) *mcp.Server {
	return newServer(&tools{c: c, caller: o.CallerID, allowDeleteAny: o.AllowDeleteAny}, o)
}

// NewShared returns one MCP server for many callers: each tool call and
// resource read uses the client, and the caller ID, that callerFor makes
// from the request that carried it (its Authorization header, for ptd's
// /mcp). One server for all sessions, because the SDK's Streamable HTTP
// handler asks for the server on every request, not only when a session
// starts.
func NewShared(callerFor func(*mcp.RequestExtra) (c *platinum.Client, callerID string), o Options) *mcp.Server {
	return newServer(&tools{callerFor: callerFor, allowDeleteAny: o.AllowDeleteAny}, o)
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
