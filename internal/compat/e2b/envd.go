package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/platinum-dev/platinum/api/gen/filesystem/filesystemconnect"
	"github.com/platinum-dev/platinum/api/gen/process/processconnect"
	"github.com/platinum-dev/platinum/internal/compat/compatkit"
	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/upstream"
)

type upstreamKey struct{}

// target is where one envd request goes: pool is addr's upstream.Host
// name.
type target struct{ pool, addr string }

// autoResumeTimeout is the least TTL a sandbox resumed by traffic gets
// (E2B's own rule: at least five minutes).
const autoResumeTimeout = 5 * time.Minute

// newProxy builds the reverse proxy for envd and port traffic. The
// upstream (sandbox address:port) is resolved per request and passed in
// the request's context.
func (h *Handler) newProxy() *httputil.ReverseProxy {
	return compatkit.AgentProxy(h.log, func(pr *httputil.ProxyRequest) {
		up, _ := pr.In.Context().Value(upstreamKey{}).(target)
		pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", up.pool, up.addr
	}, func(w http.ResponseWriter, r *http.Request, err error) {
		h.log.Warn("e2b envd proxy", "sandbox", r.Header.Get(headerSandboxID), "path", r.URL.Path, "err", err)
		writeEnvdError(w, r, http.StatusBadGateway, "unavailable",
			fmt.Sprintf("sandbox %s did not answer: %v", r.Header.Get(headerSandboxID), err))
	})
}

// serveEnvd routes a request carrying E2b-Sandbox-Id to that sandbox:
// port 49983 (or no port) is pt-agent, which speaks envd's protocol, and
// any other port is the sandbox's own service on that port. The caller
// must present the sandbox's access token (X-Access-Token, as the SDK
// sends on every envd call); pt-agent checks it again. Unknown, paused or
// dead sandboxes answer 502, as E2B's proxy does (the SDK reads that as
// "sandbox not running"); a paused one made with autoResume is resumed
// first.
func (h *Handler) serveEnvd(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(headerSandboxID)
	port := r.Header.Get(headerSandboxPort)
	if port == "" {
		port = EnvdPort
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		writeEnvdError(w, r, http.StatusBadRequest, "invalid_argument", "E2b-Sandbox-Port must be a port number")
		return
	}
	token := r.Header.Get(headerAccessToken)
	if port != EnvdPort && token == "" {
		// E2B's header for restricted public traffic.
		token = r.Header.Get("E2b-Traffic-Access-Token")
	}
	check := true
	if port == EnvdPort {
		switch {
		case r.URL.Path == "/init":
			// Orchestrator-only (it would replace the agent's token):
			// never reachable from outside, as on E2B.
			writeEnvdError(w, r, http.StatusNotFound, "not_found", "/init is internal")
			return
		case r.Method == http.MethodGet && r.URL.Path == "/health":
			check = false // needs no credential on envd either
		case r.URL.Path == "/files" && token == "" && r.URL.Query().Get("signature") != "":
			check = false // a pre-signed URL: pt-agent verifies the signature
		}
	}
	ctx := r.Context()
	sb, p, err := h.cp.AgentSandbox(ctx, id, token, check)
	if err == nil && sb.State != sandbox.StateRunning {
		// A paused sandbox made with autoResume wakes on traffic, as on
		// E2B (a health probe does not wake it).
		if state, ok := e2bState(sb.State); ok && state == statePaused && check && !sb.NoAutoResume {
			sb, err = h.resumeSandbox(ctx, p, sb, autoResumeTimeout, action(sb))
		} else {
			err = &controlplane.StateError{State: sb.State}
		}
	}
	if err != nil {
		var se *controlplane.StateError
		switch {
		case errors.Is(err, sandbox.ErrUnauthenticated):
			writeEnvdError(w, r, http.StatusUnauthorized, "unauthenticated", "invalid or missing X-Access-Token for sandbox "+id)
		case errors.As(err, &se):
			writeEnvdError(w, r, http.StatusBadGateway, "unavailable", fmt.Sprintf("sandbox %s is %s, not running; resume it with Sandbox.connect", id, mapState(se.State)))
		case errors.Is(err, sandbox.ErrNotFound):
			writeEnvdError(w, r, http.StatusBadGateway, "unavailable", fmt.Sprintf("sandbox %s not found", id))
		default:
			h.log.Error("e2b envd lookup", "sandbox", id, "err", err)
			writeEnvdError(w, r, http.StatusBadGateway, "unavailable", fmt.Sprintf("sandbox %s is not available: %v", id, errorMessage(err)))
		}
		return
	}
	if port == codeInterpreterPort && sb.Template == controlplane.CodeInterpreterTemplate {
		// The server comes up a moment after the sandbox (pt-agent starts
		// it at boot); E2B's SDK calls it right after create.
		waitListening(ctx, net.JoinHostPort(sb.Address, port), codeInterpreterWait)
	}
	if n, _ := strconv.Atoi(port); port != EnvdPort && h.cfg.Ports != nil {
		h.cfg.Ports.ForwardPort(w, r, sb, n)
		return
	}
	// pt-agent for envd, else the sandbox's own service on that port.
	addr := net.JoinHostPort(sb.Address, strconv.Itoa(controlplane.AgentPort))
	if port != EnvdPort {
		addr = net.JoinHostPort(sb.Address, port)
	}
	// Over HTTP/1.1, net/http's server closes an unread request body when
	// the response starts; pt-agent answers a stream's headers before the
	// proxy's copy of the request body has seen EOF, and the proxy's
	// transport then fails that body read and drops the upstream
	// connection mid-stream. Full duplex leaves the body to the proxy.
	_ = http.NewResponseController(w).EnableFullDuplex()
	h.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), upstreamKey{}, target{pool: upstream.Host(sb, addr), addr: addr})))
}

// codeInterpreterPort is @e2b/code-interpreter's JUPYTER_PORT.
const codeInterpreterPort = "49999"

// codeInterpreterWait bounds waitListening for the code interpreter: under
// the load of a full test run its Python server in a new gVisor sandbox took
// more than 20 s to listen. It stays below the SDK's 60 s request timeout,
// so a server that never comes up is still answered, not timed out.
const codeInterpreterWait = 45 * time.Second

// waitListening returns once addr accepts a connection, ctx ends or max
// has passed (the request then goes on and fails as it would have).
func waitListening(ctx context.Context, addr string, max time.Duration) {
	deadline := time.Now().Add(max)
	d := net.Dialer{Timeout: time.Second}
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func mapState(s sandbox.State) string {
	if st, ok := e2bState(s); ok {
		return st
	}
	return string(s)
}

func isRPC(path string) bool {
	return strings.HasPrefix(path, "/"+processconnect.ProcessName+"/") ||
		strings.HasPrefix(path, "/"+filesystemconnect.FilesystemName+"/")
}

// writeEnvdError answers in the shape the caller's client parses: Connect
// RPCs get a Connect error (string code: connect-es prefers it over the
// HTTP status, which for 404 would otherwise read as "unimplemented"),
// envd's plain endpoints get envd's {code:<int>, message}.
func writeEnvdError(w http.ResponseWriter, r *http.Request, status int, connectCode, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var body any = errorBody{Code: status, Message: msg}
	if isRPC(r.URL.Path) {
		body = map[string]string{"code": connectCode, "message": msg}
	}
	_ = json.NewEncoder(w).Encode(body)
}
