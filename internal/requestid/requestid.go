// Package requestid gives every HTTP request an id (docs/observability.md):
// the X-Request-Id response header, the request_id field of error bodies
// and the request_id attribute of every log line written for the request.
// A client's own id is kept when it is sane (1 to MaxLen printable ASCII
// characters), so one id can follow a call from the caller's logs to ptd's;
// anything else is replaced by a generated one.
package requestid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
)

// Header is the request and response header carrying the id.
const Header = "X-Request-Id"

// MaxLen bounds a client-supplied id: long enough for a UUID or a trace
// id with a prefix, short enough to log on every line.
const MaxLen = 128

type key struct{}

// From returns the request's id, or "" outside Middleware.
func From(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, key{}, id)
}

// Carry returns ctx carrying origin's id, if origin has one: for work a
// request starts that outlives it (so runs on another context), whose log
// lines should still name the request that caused it.
func Carry(ctx, origin context.Context) context.Context {
	if id := From(origin); id != "" {
		return With(ctx, id)
	}
	return ctx
}

// Valid reports whether a client's id can be kept: 1 to MaxLen characters
// of printable ASCII without spaces (so it is one token in a log line and
// cannot carry control characters into a header or a terminal).
func Valid(id string) bool {
	if id == "" || len(id) > MaxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// New returns a fresh id: "req_" and 24 hex characters (96 random bits).
func New() string {
	var b [12]byte
	_, _ = rand.Read(b[:])    // crypto/rand never fails on Linux
	var id [4 + 2*len(b)]byte // built in place: one allocation, the string
	copy(id[:], "req_")
	hex.Encode(id[4:], b[:])
	return string(id[:])
}

// Middleware sets the id (the client's when Valid, else New) on the
// response header and the request's context before next runs. A request
// that already has one (an outer Middleware) keeps it.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if From(r.Context()) != "" {
			next.ServeHTTP(w, r)
			return
		}
		id := r.Header.Get(Header)
		if !Valid(id) {
			id = New()
		}
		w.Header().Set(Header, id)
		next.ServeHTTP(w, r.WithContext(With(r.Context(), id)))
	})
}

// LogHandler adds the request_id attribute to every record logged with a
// context that carries one (slog's *Context methods).
type LogHandler struct{ slog.Handler }

// NewLogHandler wraps h.
func NewLogHandler(h slog.Handler) *LogHandler { return &LogHandler{h} }

// Handle implements slog.Handler.
func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := From(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *LogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &LogHandler{h.Handler.WithAttrs(as)}
}

// WithGroup implements slog.Handler.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{h.Handler.WithGroup(name)}
}
