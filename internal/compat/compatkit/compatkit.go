// Package compatkit holds what the E2B and Daytona compatibility layers
// share, so that a fix to one reaches both: the error a handler returns
// with its status, the JSON answer, the connection pool to pt-agent, the restore fields of a sandbox answer, and
// the list of templates an error names when a caller asks for one that is
// not there.
package compatkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"time"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/upstream"
)

// APIError is an error with the status a compatibility layer answers,
// built by handlers for cases the domain never sees (malformed JSON,
// unsupported options, waits that ran out). Each layer's error mapping
// turns it into its own error body.
type APIError struct {
	Status int
	Msg    string
	// Code is a machine-readable error code, for the APIs that have one
	// (E2B's error_code).
	Code string
	// RetryAfter, in seconds, marks a retryable answer (Retry-After).
	RetryAfter int
}

func (e *APIError) Error() string { return e.Msg }

// BadRequest is a 400 with a formatted message.
func BadRequest(format string, args ...any) error {
	return &APIError{Status: http.StatusBadRequest, Msg: fmt.Sprintf(format, args...)}
}

// WriteJSON answers status with v as JSON. An encoding error is dropped:
// the status is already sent, and the client sees a cut body.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// AgentTransport is the connection pool a compatibility layer's proxy
// reaches pt-agent through: dialled with upstream.Dial, so that a kept
// connection never serves another sandbox or another boot (see package
// upstream). It speaks HTTP/1.1: agents answer plain HTTP/1.1 (and h2c),
// and Connect streams flush per message over HTTP/1.1 chunks, which is
// what the SDKs speak.
func AgentTransport() *http.Transport {
	return &http.Transport{
		DialContext:         upstream.Dial(&net.Dialer{Timeout: 5 * time.Second}),
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
	}
}

// AgentProxy is a compatibility layer's reverse proxy to pt-agent (or to a
// sandbox's port), over AgentTransport. rewrite points the outgoing
// request at its upstream; fail answers an upstream that did not, in the
// layer's error shape. FlushInterval -1 flushes every write at once, so
// streams (Connect server-streams, WebSockets, logs) reach the SDK as they
// happen. A request its caller gave up on is not answered (nobody reads
// it), and the proxy's own complaints go to log at debug level: streams
// cut by their callers (a stopped watch, a killed PTY) are routine.
func AgentProxy(log *slog.Logger, rewrite func(*httputil.ProxyRequest), fail func(w http.ResponseWriter, r *http.Request, err error)) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:       rewrite,
		Transport:     AgentTransport(),
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				return
			}
			fail(w, r, err)
		},
	}
}

// Restored is what a sandbox answer says of how the current boot came up
// (the restore kind, and whether memory came back): nothing before a
// first start. Both APIs carry it as an extension of their sandbox shape.
func Restored(sb sandbox.Sandbox) (restore string, ramRestored *bool) {
	if sb.LastStart == nil {
		return "", nil
	}
	ram := sb.LastStart.RAMRestored
	return sb.LastStart.Restore, &ram
}

// TemplateLister is the part of controlplane.Service TemplateList needs.
type TemplateLister interface {
	ListTemplates(ctx context.Context) ([]controlplane.Template, error)
}

// TemplateList names the server's templates, sorted and comma-separated,
// for error messages that tell a caller what it could have asked for; "no
// templates" when there are none or they cannot be listed (the message is
// about the caller's mistake, not this one).
func TemplateList(ctx context.Context, cp TemplateLister) string {
	ts, err := cp.ListTemplates(ctx)
	if err != nil || len(ts) == 0 {
		return "no templates"
	}
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		names = append(names, t.Slug)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
