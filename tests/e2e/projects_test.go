package e2e

import (
	"strings"
	"testing"
)

// TestProjectsE2E: docs/access.md's projects: creates land in the org's default
// project unless they name one; a project-scoped token sees and creates
// only in its project (everything else is 404); lists filter by project;
// unknown projects are 404 naming project_id; members get 403 on admin
// routes.
func TestProjectsE2E(t *testing.T) {
	admin := newClient(t)
	// A fresh org, so the test owns every project and sandbox it lists.
	_, org := createOrg(t, admin, "prj-"+randHex(4))

	r := org.do("GET", "/v1/projects", nil)
	rows, _ := r.JSON()["rows"].([]any)
	if r.Status != 200 || len(rows) != 1 || rows[0].(map[string]any)["default"] != true {
		t.Fatalf("a new org's projects: %d %s, want its default project", r.Status, r.Body)
	}
	defID := rows[0].(map[string]any)["id"].(string)
	r = org.do("POST", "/v1/projects", map[string]any{"name": "ml"})
	if r.Status != 201 || !strings.HasPrefix(r.JSON()["id"].(string), "prj_") {
		t.Fatalf("create project: %d %s", r.Status, r.Body)
	}
	mlID := r.JSON()["id"].(string)
	if r := org.do("GET", "/v1/projects/"+mlID, nil); r.Status != 200 || r.JSON()["name"] != "ml" {
		t.Fatalf("get project: %d %s", r.Status, r.Body)
	}
	if r := admin.do("GET", "/v1/projects/"+mlID, nil); r.Status != 404 {
		t.Errorf("another org's project: %d %s, want 404", r.Status, r.Body)
	}

	inDef := postBusybox(t, org, org, map[string]any{})
	if inDef.Status != 201 || inDef.JSON()["project_id"] != defID {
		t.Fatalf("create without project_id: %d %s, want project %s", inDef.Status, inDef.Body, defID)
	}
	inML := postBusybox(t, org, org, map[string]any{"project_id": mlID})
	if inML.Status != 201 || inML.JSON()["project_id"] != mlID {
		t.Fatalf("create in ml: %d %s", inML.Status, inML.Body)
	}
	for _, bad := range []string{"prj_01JNDX3V6Z9Q6N1S9Y8K7C2F3A", "nope"} {
		if r := postBusybox(t, org, org, map[string]any{"project_id": bad}); r.Status != 404 || r.JSON()["code"] != "not_found" || r.JSON()["field"] != "project_id" {
			t.Errorf("create in unknown project %s: %d %s", bad, r.Status, r.Body)
		}
	}

	// A token scoped to ml.
	r = org.do("POST", "/v1/tokens", map[string]any{"project_id": mlID})
	if r.Status != 201 || r.JSON()["project_id"] != mlID || r.JSON()["role"] != "member" {
		t.Fatalf("create project token: %d %s", r.Status, r.Body)
	}
	scoped := &client{t: t, token: r.JSON()["token"].(string)}
	defSbx, mlSbx := inDef.JSON()["id"].(string), inML.JSON()["id"].(string)
	if r := scoped.do("GET", "/v1/sandboxes/"+defSbx, nil); r.Status != 404 {
		t.Errorf("project token gets a default-project sandbox: %d, want 404", r.Status)
	}
	if r := scoped.do("DELETE", "/v1/sandboxes/"+defSbx, nil); r.Status != 404 {
		t.Errorf("project token deletes a default-project sandbox: %d, want 404", r.Status)
	}
	if r := scoped.do("GET", "/v1/sandboxes/"+mlSbx, nil); r.Status != 200 {
		t.Errorf("project token gets its project's sandbox: %d %s", r.Status, r.Body)
	}
	if r := postBusybox(t, scoped, org, map[string]any{"project_id": defID}); r.Status != 404 {
		t.Errorf("project token creates in another project: %d %s, want 404", r.Status, r.Body)
	}
	own := postBusybox(t, scoped, org, map[string]any{})
	if own.Status != 201 || own.JSON()["project_id"] != mlID {
		t.Fatalf("project token creates: %d %s, want project %s", own.Status, own.Body, mlID)
	}
	listIDs := func(c *client, q string) []string {
		r := c.do("GET", "/v1/sandboxes"+q, nil)
		var ids []string
		rows, _ := r.JSON()["rows"].([]any)
		for _, row := range rows {
			ids = append(ids, row.(map[string]any)["id"].(string))
		}
		return ids
	}
	if ids := listIDs(scoped, ""); len(ids) != 2 || strings.Contains(strings.Join(ids, ","), defSbx) {
		t.Errorf("project token lists %v, want its 2 sandboxes", ids)
	}
	if ids := listIDs(org, "?project_id="+defID); len(ids) != 1 || ids[0] != defSbx {
		t.Errorf("list by the default project: %v, want [%s]", ids, defSbx)
	}
	if ids := listIDs(org, ""); len(ids) != 3 {
		t.Errorf("org token lists %v, want all 3", ids)
	}
	if r := scoped.do("GET", "/v1/projects", nil); len(r.JSON()["rows"].([]any)) != 1 {
		t.Errorf("project token lists projects %s, want only its own", r.Body)
	}

	// forbidden: member and project tokens on admin routes.
	r = org.do("POST", "/v1/tokens", map[string]any{})
	member := &client{t: t, token: r.JSON()["token"].(string)}
	for _, tc := range []struct {
		c          *client
		path, name string
		body       map[string]any
	}{
		{member, "/v1/projects", "member creates a project", map[string]any{"name": "x"}},
		{member, "/v1/tokens", "member creates a token", map[string]any{}},
		{scoped, "/v1/tokens", "project token creates a token", map[string]any{}},
		{org, "/v1/orgs", "org admin creates an org", map[string]any{"name": "x"}},
	} {
		if r := tc.c.do("POST", tc.path, tc.body); r.Status != 403 || r.JSON()["code"] != "forbidden" {
			t.Errorf("%s: %d %s, want 403 forbidden", tc.name, r.Status, r.Body)
		}
	}
	if r := org.do("PUT", "/v1/orgs/"+r.JSON()["org_id"].(string)+"/quotas", map[string]any{"max_sandboxes": 1000}); r.Status != 403 || r.JSON()["code"] != "forbidden" {
		t.Errorf("an org raises its own quota: %d %s, want 403 forbidden", r.Status, r.Body)
	}
}

// TestOrgQuotaE2E: per-org limits on active sandboxes answer 429
// quota_exceeded; a platform admin sets them per org.
func TestOrgQuotaE2E(t *testing.T) {
	admin := newClient(t)
	orgID, org := createOrg(t, admin, "quota-"+randHex(4))
	if r := admin.do("PUT", "/v1/orgs/"+orgID+"/quotas", map[string]any{"max_sandboxes": 1, "max_cpu": 2}); r.Status != 200 {
		t.Fatalf("set quota: %d %s", r.Status, r.Body)
	}
	if r := postBusybox(t, org, org, map[string]any{"cpu": 4}); r.Status != 429 || r.JSON()["code"] != "quota_exceeded" || r.JSON()["limit"] != "cpu" {
		t.Errorf("over the cpu quota: %d %s, want 429 quota_exceeded on cpu", r.Status, r.Body)
	}
	if r := postBusybox(t, org, org, map[string]any{}); r.Status != 201 {
		t.Fatalf("first sandbox: %d %s", r.Status, r.Body)
	}
	if r := postBusybox(t, org, org, map[string]any{}); r.Status != 429 || r.JSON()["code"] != "quota_exceeded" || r.JSON()["limit"] != "sandboxes" || r.JSON()["scope"] != "org" {
		t.Errorf("second sandbox: %d %s, want 429 quota_exceeded on sandboxes", r.Status, r.Body)
	}
	r := org.do("GET", "/v1/orgs/"+orgID+"/quotas", nil)
	usage, _ := r.JSON()["usage"].(map[string]any)
	if r.Status != 200 || usage["sandboxes"] != float64(1) {
		t.Errorf("quota view: %d %s", r.Status, r.Body)
	}
}

// TestMetadataE2E: docs/sandboxes.md's metadata limits and the metadata[k]=v list
// filter.
func TestMetadataE2E(t *testing.T) {
	c := newClient(t)
	tag := "md-" + randHex(6)
	cleanupTagged(t, c, tag)
	big := map[string]string{"run": tag}
	for i := range 16 {
		big["k"+strings.Repeat("x", i)] = "v"
	}
	for _, tc := range []struct {
		name string
		md   map[string]string
		want string
	}{
		{"17 keys", big, "at most 16 keys"},
		{"long key", map[string]string{strings.Repeat("k", 65): "v"}, "64 characters"},
		{"long value", map[string]string{"k": strings.Repeat("v", 513)}, "512 characters"},
	} {
		r := c.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox", "metadata": tc.md})
		if r.Status != 400 || r.JSON()["code"] != "invalid_request" || !strings.Contains(r.JSON()["error"].(string), tc.want) {
			t.Errorf("%s: %d %s, want 400 invalid_request naming %q", tc.name, r.Status, r.Body, tc.want)
		}
	}
	for _, v := range []string{"a", "b"} {
		if r := c.do("POST", "/v1/sandboxes", map[string]any{"template": "busybox", "metadata": map[string]string{"run": tag, "v": v}}); r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
	}
	r := c.do("GET", "/v1/sandboxes?paginated=true&metadata[run]="+tag+"&metadata[v]=b", nil)
	if r.Status != 200 || r.JSON()["total"] != float64(1) {
		t.Errorf("metadata filter: %d %s, want 1", r.Status, r.Body)
	}
}

// postBusybox has c create a busybox sandbox with body (no wait) and, when
// it made one, has owner delete it when the test ends.
func postBusybox(t *testing.T, c, owner *client, body map[string]any) response {
	t.Helper()
	body["template"] = "busybox"
	r := c.do("POST", "/v1/sandboxes", body)
	if r.Status == 201 {
		id := r.JSON()["id"].(string)
		t.Cleanup(func() { owner.do("DELETE", "/v1/sandboxes/"+id, nil) })
	}
	return r
}
