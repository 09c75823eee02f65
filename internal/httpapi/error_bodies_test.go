package httpapi

import (
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/sandbox"
)

// TestErrorBodies: every error code of the sandbox API, as
// the one mapper writes it: status, code and the extra fields clients
// read (the resize hint exactly as the docs show it, the children that
// block a delete, the quota's scope).
func TestErrorBodies(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("controlplane: %w", err) }
	id := "sbx_01KABCDEFGHJKMNPQRSTVWXYZ0"
	tests := []struct {
		name   string
		err    error
		status int
		want   map[string]any
	}{
		{"env over 256 KiB", wrap(fmt.Errorf("the merged environment would be 300000 bytes: %w", controlplane.ErrEnvTooLarge)), 413,
			map[string]any{"code": "env_too_large"}},
		{"one variable over 128 KiB", wrap(&controlplane.EnvVarTooLargeError{Key: "BIG", Bytes: 131077}), 400,
			map[string]any{"code": "env_var_too_large", "field": "env"}},
		{"not resizable live", wrap(&controlplane.NotResizableError{ID: id, Reason: "cpu 32 is above this boot's maximum of 16"}), 409,
			map[string]any{
				"code":        "sandbox_not_resizable",
				"error":       "this running sandbox cannot change cpu or ram_mb live (cpu 32 is above this boot's maximum of 16); stop it, then resize",
				"live_resize": map[string]any{"supported": false, "reason": "cpu 32 is above this boot's maximum of 16"},
				"hint": map[string]any{"action": "stop_then_resize", "applies_at": "restart",
					"steps": []any{"POST /v1/sandboxes/" + id + "/stop", "POST /v1/sandboxes/" + id + "/resize"}},
			}},
		{"disk cannot grow online", wrap(&controlplane.DiskGrowError{Reason: "xfs_growfs: not supported"}), 409,
			map[string]any{"code": "disk_grow_unsupported"}},
		{"parent with live children", wrap(&controlplane.ChildrenError{Children: []string{"sbx_a", "sbx_b"}}), 409,
			map[string]any{"code": "conflict", "children": []any{"sbx_a", "sbx_b"}}},
		{"tree quota", wrap(&sandbox.QuotaError{Scope: "tree", Limit: "ram_mb", Max: 2048, Wanted: 3072}), 429,
			map[string]any{"code": "quota_exceeded", "scope": "tree", "limit": "ram_mb", "max": 2048.0}},
		{"org quota on resize", wrap(&sandbox.QuotaError{Scope: "org", Limit: "cpu", Max: 4, Wanted: 5}), 429,
			map[string]any{"code": "quota_exceeded", "scope": "org", "limit": "cpu", "max": 4.0}},
	}
	a := &API{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			a.writeError(w, httptest.NewRequest("POST", "/v1/sandboxes/"+id+"/resize", nil), tc.err)
			if w.Code != tc.status {
				t.Errorf("status %d, want %d", w.Code, tc.status)
			}
			checkErrorBody(t, w, tc.want)
		})
	}
}
