package requestid

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"", false},
		{"a", true},
		{"req_0123456789abcdef01234567", true},
		{"trace:1/2-3.4_5~!", true},
		{strings.Repeat("x", MaxLen), true},
		{strings.Repeat("x", MaxLen+1), false},
		{"has space", false},
		{"tab\there", false},
		{"new\nline", false},
		{"del\x7f", false},
		{"caf\u00e9", false},
	} {
		if got := Valid(tc.id); got != tc.want {
			t.Errorf("Valid(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}

// TestMiddlewareAndLogs: the id reaches the handler's context, the answer's
// header and every line logged with that context; an outer id wins.
func TestMiddlewareAndLogs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewLogHandler(slog.NewTextHandler(&buf, nil))).With("component", "test")
	var seen string
	h := Middleware(Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = From(r.Context())
		log.InfoContext(r.Context(), "handled")
	})))
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set(Header, "abc-123")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if seen != "abc-123" || rec.Header().Get(Header) != "abc-123" {
		t.Errorf("handler saw %q, header %q, want the client's id", seen, rec.Header().Get(Header))
	}
	if !strings.Contains(buf.String(), "request_id=abc-123") || !strings.Contains(buf.String(), "component=test") {
		t.Errorf("log line %q lacks request_id or the logger's attributes", buf.String())
	}
	buf.Reset()
	log.InfoContext(context.Background(), "outside")
	if strings.Contains(buf.String(), "request_id") {
		t.Errorf("a line outside any request has a request_id: %q", buf.String())
	}
}

// TestCarry: background work takes the id of the request that started it
// and keeps its own context's other values; without an id it is unchanged.
func TestCarry(t *testing.T) {
	type other struct{}
	base := context.WithValue(context.Background(), other{}, "kept")
	for _, tc := range []struct {
		name   string
		origin context.Context
		want   string
	}{
		{"request id", With(context.Background(), "req_1"), "req_1"},
		{"no request", context.Background(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := Carry(base, tc.origin)
			if got := From(ctx); got != tc.want {
				t.Errorf("From = %q, want %q", got, tc.want)
			}
			if ctx.Value(other{}) != "kept" {
				t.Error("the context's own values were lost")
			}
		})
	}
}
