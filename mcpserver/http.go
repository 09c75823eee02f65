package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// ErrUnauthenticated is what HTTPOptions.Authenticate returns (wrapped)
// for a missing or unknown token: the answer is 401, not 500.
var ErrUnauthenticated = errors.New("unauthenticated")

// HTTPOptions configure the Streamable HTTP handler ptd serves at /mcp.
type HTTPOptions struct {
	// API is ptd's /v1 handler. Tool calls reach it in-process (see
	// handlerTransport) with the caller's own bearer token, so they are
	// authorized, scoped, validated and idempotent exactly like the same
	// calls on /v1.
	API http.Handler
	// Authenticate checks a bearer token and returns a stable identity
	// for it (the token's ID). An MCP session is bound to the identity
	// of the token that opened it: a request of that session with another
	// token is refused, so a session ID alone is worth nothing.
	Authenticate func(ctx context.Context, token string) (string, error)
	// AllowDeleteAny: see Options.
	AllowDeleteAny bool
	// SessionTimeout closes sessions idle this long (default 30 minutes).
	SessionTimeout time.Duration
	Logger         *slog.Logger
}

type identityKey struct{}

// apiBase is the base URL in-process clients use; handlerTransport never
// dials it, and /v1 handlers never read it.
const apiBase = "http://ptd.in-process"

// HTTPHandler serves /mcp. Shutdown ends its open streams.
type HTTPHandler struct {
	o     HTTPOptions
	inner http.Handler
	// base is cancelled by Shutdown; every request's context ends with it,
	// so the long-lived SSE streams of sessions let the server stop.
	base context.Context
	stop context.CancelFunc
}

// NewHTTPHandler returns the /mcp handler: bearer authentication, then
// the SDK's Streamable HTTP transport with one shared Server whose calls
// each use the token of the request that carried them.
func NewHTTPHandler(o HTTPOptions) *HTTPHandler {
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	hc := &http.Client{Transport: handlerTransport{h: o.API, log: o.Logger}}
	server := NewShared(func(extra *mcp.RequestExtra) (*platinum.Client, string) {
		// The token of the request that carried this call: authenticated
		// below, and of the identity the session is bound to.
		tok := ""
		if extra != nil && extra.Header != nil {
			tok, _ = strings.CutPrefix(extra.Header.Get("Authorization"), "Bearer ")
		}
		tok = strings.TrimSpace(tok)
		return platinum.New(apiBase, tok, platinum.WithHTTPClient(hc), platinum.WithUserAgent("platinum-mcp/"+Version)), CallerID(tok)
	}, Options{AllowDeleteAny: o.AllowDeleteAny, Logger: o.Logger})
	streamable := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		Logger:         o.Logger,
		SessionTimeout: o.SessionTimeout,
		// Every request needs a bearer token, which a page that rebinds
		// a DNS name to 127.0.0.1 does not have; and the check would turn
		// away a reverse proxy on the same host that keeps the public
		// Host header.
		DisableLocalhostProtection:   true,
		PropagateRequestCancellation: true,
	})
	// The SDK binds sessions to TokenInfo.UserID; the identity comes from
	// the check below, done once per request.
	inner := auth.RequireBearerToken(func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		id, _ := r.Context().Value(identityKey{}).(string)
		return &auth.TokenInfo{UserID: id}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)
	h := &HTTPHandler{o: o, inner: inner}
	h.base, h.stop = context.WithCancel(context.Background())
	return h
}

// ServeHTTP authenticates the request with the same tokens as /v1 and
// hands it to the MCP transport.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, err := h.o.Authenticate(r.Context(), bearer(r))
	if err != nil {
		status, code := http.StatusUnauthorized, platinum.CodeUnauthorized
		if !errors.Is(err, ErrUnauthenticated) {
			status, code = http.StatusInternalServerError, platinum.CodeInternal
			h.o.Logger.Error("mcp: authenticate", "err", err)
		}
		// The same shape as /v1's errors.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("WWW-Authenticate", `Bearer realm="platinum"`)
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error(), "code": code})
		return
	}
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), identityKey{}, id))
	defer cancel()
	stop := context.AfterFunc(h.base, cancel)
	defer stop()
	h.inner.ServeHTTP(w, r.WithContext(ctx))
}

// Shutdown ends every open /mcp request (for http.Server.RegisterOnShutdown:
// a session's SSE stream never ends by itself).
func (h *HTTPHandler) Shutdown() { h.stop() }

func bearer(r *http.Request) string {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return strings.TrimSpace(tok)
}
