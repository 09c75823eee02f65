package httpapi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNetworkPolicyAPI(t *testing.T) {
	srv, h, tok := newServer(t)
	close(h.release) // starts finish at once
	resp, m := call(t, srv, tok, "POST", "/v1/sandboxes?wait_for_state=running",
		`{"template":"busybox","network":{"egress":"deny","allow_out":["10.0.0.1","API.example.com"]}}`)
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %v", resp.StatusCode, m)
	}
	id := m["id"].(string)
	want := map[string]any{"egress": "deny", "allow_out": []any{"10.0.0.1/32", "api.example.com"}, "deny_out": []any{}}
	if diff := cmp.Diff(want, m["network"]); diff != "" {
		t.Errorf("create's network (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		name, body string
		status     int
		field      string
	}{
		{"unknown field", `{"egress":"deny","allow":[]}`, 400, ""},
		{"bad egress", `{"egress":"nope"}`, 400, "network.egress"},
		{"domain in deny_out", `{"deny_out":["example.com"]}`, 400, "network.deny_out"},
		{"garbage entry", `{"allow_out":["not a host!"]}`, 400, "network.allow_out"},
	} {
		resp, m := call(t, srv, tok, "PATCH", "/v1/sandboxes/"+id+"/network", tc.body)
		if resp.StatusCode != tc.status || (tc.field != "" && m["field"] != tc.field) {
			t.Errorf("%s: %d %v, want %d on %q", tc.name, resp.StatusCode, m, tc.status, tc.field)
		}
	}
	resp, m = call(t, srv, tok, "PATCH", "/v1/sandboxes/"+id+"/network", `{"deny_out":["192.168.1.0/24"]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("patch: %d %v", resp.StatusCode, m)
	}
	want = map[string]any{"egress": "allow", "allow_out": []any{}, "deny_out": []any{"192.168.1.0/24"}}
	if diff := cmp.Diff(want, m["network"]); diff != "" {
		t.Errorf("patched network (-want +got):\n%s", diff)
	}
	_, m = call(t, srv, tok, "GET", "/v1/sandboxes/"+id, "")
	if diff := cmp.Diff(want, m["network"]); diff != "" {
		t.Errorf("stored network (-want +got):\n%s", diff)
	}
	if resp, _ := call(t, srv, tok, "PATCH", "/v1/sandboxes/sbx_01KZZZZZZZZZZZZZZZZZZZZZZZ/network", `{}`); resp.StatusCode != 404 {
		t.Errorf("unknown sandbox: %d", resp.StatusCode)
	}
}
