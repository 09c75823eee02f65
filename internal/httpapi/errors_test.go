package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestErrorMapper: the one mapper turns the domain's error categories,
// however wrapped, into stable statuses and snake_case codes, in a JSON
// body {code, error}; an unknown cause is a 500 that does not leak it.
func TestErrorMapper(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("controlplane: get: %w", err) }
	tests := []struct {
		name   string
		err    error
		status int
		want   map[string]any
	}{
		{"not found", wrap(sandbox.ErrNotFound), 404, map[string]any{"code": "not_found"}},
		{"invalid", wrap(sandbox.ErrInvalidArgument), 400, map[string]any{"code": "invalid_request"}},
		{"field", wrap(&sandbox.FieldError{Field: "cpu", Reason: "must be positive"}), 400,
			map[string]any{"code": "invalid_request", "error": "cpu: must be positive", "field": "cpu"}},
		{"bad request", badRequest("limit must be an integer", "limit"), 400,
			map[string]any{"code": "invalid_request", "error": "limit must be an integer", "field": "limit"}},
		{"unauthenticated", wrap(sandbox.ErrUnauthenticated), 401,
			map[string]any{"code": "unauthorized", "error": "missing or unknown token: send Authorization: Bearer $PT_TOKEN"}},
		{"forbidden", wrap(sandbox.ErrForbidden), 403, map[string]any{"code": "forbidden"}},
		{"conflict", wrap(sandbox.ErrConflict), 409, map[string]any{"code": "conflict"}},
		{"already exists", wrap(sandbox.ErrAlreadyExists), 409, map[string]any{"code": "conflict"}},
		{"unavailable", wrap(sandbox.ErrUnavailable), 503, map[string]any{"code": "unavailable"}},
		{"deadline", wrap(context.DeadlineExceeded), 504,
			map[string]any{"code": "timeout", "error": "the operation timed out; retry"}},
		{"unknown cause", errors.New("open /var/lib/platinum/secret: permission denied"), 500,
			map[string]any{"code": "internal", "error": "internal error; retry, and report it if it persists"}},
	}
	a := &API{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			a.writeError(w, httptest.NewRequest("GET", "/v1/sandboxes/x", nil), tc.err)
			if w.Code != tc.status || w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("status %d %q, want %d application/json", w.Code, w.Header().Get("Content-Type"), tc.status)
			}
			checkErrorBody(t, w, tc.want)
		})
	}
}

// checkErrorBody checks what every error body the mapper writes must be:
// JSON with a non-empty "error" message and otherwise exactly want's
// fields. The message itself is compared only when want names it, as most
// are the wrapped error's text as is.
func checkErrorBody(t *testing.T, w *httptest.ResponseRecorder, want map[string]any) {
	t.Helper()
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	if msg, _ := got["error"].(string); msg == "" {
		t.Errorf("no error message: %v", got)
	}
	if _, ok := want["error"]; !ok {
		delete(got, "error")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}
