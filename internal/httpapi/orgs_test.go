package httpapi

import (
	"testing"
)

// TestDeleteOrgRoute: DELETE /v1/orgs/{id} answers 202 with the org and
// how many sandboxes it is deleting; the org's token stops working at once;
// refusals keep their documented codes.
func TestDeleteOrgRoute(t *testing.T) {
	srv, _, tok := newServer(t)
	resp, m := call(t, srv, tok, "POST", "/v1/orgs", `{"name":"doomed"}`)
	if resp.StatusCode != 201 {
		t.Fatalf("create org: %d %v", resp.StatusCode, m)
	}
	orgID := m["org"].(map[string]any)["id"].(string)
	orgTok := m["token"].(string)
	if resp, m := call(t, srv, orgTok, "POST", "/v1/sandboxes", `{"template":"busybox"}`); resp.StatusCode != 201 && resp.StatusCode != 202 {
		t.Fatalf("create in the org: %d %v", resp.StatusCode, m)
	}
	if resp, m := call(t, srv, orgTok, "DELETE", "/v1/orgs/"+orgID, ""); resp.StatusCode != 403 || m["code"] != "forbidden" {
		t.Errorf("org admin deletes its own org: %d %v", resp.StatusCode, m)
	}
	if resp, m := call(t, srv, tok, "DELETE", "/v1/orgs/org_default", ""); resp.StatusCode != 409 {
		t.Errorf("delete the platform's org: %d %v", resp.StatusCode, m)
	}
	if resp, m := call(t, srv, tok, "DELETE", "/v1/orgs/org_01ARZ3NDEKTSV4RRFFQ69G5FAV", ""); resp.StatusCode != 404 {
		t.Errorf("delete an unknown org: %d %v", resp.StatusCode, m)
	}
	resp, m = call(t, srv, tok, "DELETE", "/v1/orgs/"+orgID, "")
	if resp.StatusCode != 202 || m["id"] != orgID || m["name"] != "doomed" || m["sandboxes_deleting"] != 1.0 || m["deleted_at"] == nil {
		t.Fatalf("delete org: %d %v", resp.StatusCode, m)
	}
	if resp, _ := call(t, srv, orgTok, "GET", "/v1/sandboxes", ""); resp.StatusCode != 401 {
		t.Errorf("the deleted org's token: %d, want 401", resp.StatusCode)
	}
}
