package e2e

import (
	"strings"
	"testing"
	"time"
)

// A sandbox's TTL, status, kill and create fields (docs/lifecycle.md,
// docs/sandboxes.md) as an SDK that speaks camelCase sends them: each
// call runs here as the REST request, with camelCase field names in the
// body (ttlMs, templateVersionId, projectId, idempotencyKey). Responses
// use the REST names (expires_at, destroyed_reason, …).

// documentedStatuses are the statuses docs/lifecycle.md lists.
var documentedStatuses = map[string]bool{"creating": true, "starting": true, "ready": true, "running": true,
	"idle": true, "expiring": true, "destroyed": true, "failed": true}

func parseISO(t *testing.T, v any) time.Time {
	t.Helper()
	s, _ := v.(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("not ISO 8601: %v", v)
	}
	return at
}

func TestCamelCaseSandboxCalls(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "python-node")

	// client.sandboxes.create({ template: "python-node", ttlMs: 10 * 60 * 1000, metadata: { run: "nightly-eval" } })
	r := c.do("POST", "/v1/sandboxes?wait_for_state=running", `{"template":"python-node","ttlMs":600000,"metadata":{"run":"nightly-eval"}}`)
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	sbx := r.JSON()
	id := sbx["id"].(string)
	t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
	// console.log(sandbox.id, sandbox.status, sandbox.expiresAt)
	if !strings.HasPrefix(id, "sbx_") || !documentedStatuses[sbx["status"].(string)] || sbx["ttl_ms"] != 600000.0 {
		t.Errorf("create: id %v status %v ttl_ms %v", id, sbx["status"], sbx["ttl_ms"])
	}
	if d := parseISO(t, sbx["expires_at"]).Sub(parseISO(t, sbx["created_at"])); d != 10*time.Minute {
		t.Errorf("expires_at - created_at = %v, want 10m", d)
	}

	t.Run("Sandbox object", func(t *testing.T) {
		// id, orgId, projectId, status, templateId, templateSlug,
		// templateVersion, templateVersionId, ttlMs, expiresAt, metadata.
		m := c.do("GET", "/v1/sandboxes/"+id, nil).JSON()
		checks := map[string]func(v any) bool{
			"id":                  func(v any) bool { return v == id },
			"org_id":              func(v any) bool { s, _ := v.(string); return s != "" },
			"project_id":          func(v any) bool { s, _ := v.(string); return strings.HasPrefix(s, "prj_") },
			"status":              func(v any) bool { s, _ := v.(string); return documentedStatuses[s] },
			"template_id":         func(v any) bool { return v == "python-node" },
			"template_slug":       func(v any) bool { return v == "python-node" },
			"template_version":    func(v any) bool { n, _ := v.(float64); return n >= 1 },
			"template_version_id": func(v any) bool { s, _ := v.(string); return strings.HasPrefix(s, "tplv_") },
			"ttl_ms":              func(v any) bool { return v == 600000.0 },
			"expires_at":          func(v any) bool { _, err := time.Parse(time.RFC3339Nano, v.(string)); return err == nil },
			"metadata":            func(v any) bool { md, _ := v.(map[string]any); return md["run"] == "nightly-eval" },
		}
		for k, ok := range checks {
			if v, present := m[k]; !present || !ok(v) {
				t.Errorf("%s = %v", k, m[k])
			}
		}
		for _, k := range []string{"destroyed_at", "destroyed_reason"} {
			if _, present := m[k]; present {
				t.Errorf("%s present on a live sandbox: %v", k, m[k])
			}
		}
	})

	t.Run("get", func(t *testing.T) {
		// client.sandboxes.get("sbx_abc123"): not_found.
		if r := c.do("GET", "/v1/sandboxes/sbx_abc123", nil); r.Status != 404 || r.JSON()["code"] != "not_found" {
			t.Errorf("get sbx_abc123: %d %s", r.Status, r.Body)
		}
		if m := c.do("GET", "/v1/sandboxes/"+id, nil).JSON(); !documentedStatuses[m["status"].(string)] {
			t.Errorf("status %v", m["status"])
		}
	})

	t.Run("list and commands.run", func(t *testing.T) {
		// for (const sandbox of sandboxes.data) await sandbox.commands.run("python --version")
		r := c.do("GET", "/v1/sandboxes?metadata[run]=nightly-eval", nil)
		rows, _ := r.JSON()["rows"].([]any)
		if r.Status != 200 || len(rows) != 1 || rows[0].(map[string]any)["id"] != id {
			t.Fatalf("list by metadata: %d %s", r.Status, r.Body)
		}
		res := c.sh(id, "python --version")
		if res.ExitCode != 0 || !strings.HasPrefix(res.Stdout+res.Stderr, "Python 3") {
			t.Errorf("python --version: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
		}
	})

	t.Run("setTtl", func(t *testing.T) {
		// client.sandboxes.setTtl(sandbox.id, { ttlMs: 60 * 60 * 1000 })
		before := time.Now()
		r := c.do("POST", "/v1/sandboxes/"+id+"/ttl", `{"ttlMs":3600000}`)
		after := time.Now()
		if r.Status != 200 {
			t.Fatalf("setTtl: %d %s", r.Status, r.Body)
		}
		exp := parseISO(t, r.JSON()["expires_at"])
		if exp.Before(before.Add(time.Hour).Add(-time.Second)) || exp.After(after.Add(time.Hour).Add(time.Second)) {
			t.Errorf("expires_at %v not an hour after the request (%v…%v)", exp, before, after)
		}
		// { ttlMs, idempotencyKey }: a retry answers the first result.
		k := "camel-ttl-" + randHex(4)
		body := `{"ttlMs":1800000,"idempotencyKey":"` + k + `"}`
		first := c.do("POST", "/v1/sandboxes/"+id+"/ttl", body)
		sleep(20)
		again := c.do("POST", "/v1/sandboxes/"+id+"/ttl", body)
		if first.Status != 200 || again.Status != 200 || again.Header.Get("Idempotent-Replayed") != "true" ||
			first.JSON()["expires_at"] != again.JSON()["expires_at"] {
			t.Errorf("keyed setTtl retry: %d %s / %d %s", first.Status, first.Body, again.Status, again.Body)
		}
		for _, tc := range []struct{ body, code string }{
			{`{"ttlMs":86400001}`, "sandbox_ttl_exceeded"},
			{`{"ttlMs":0}`, "invalid_request"},
			{`{"ttlMs":-5}`, "invalid_request"},
			{`{"ttl_ms":60000,"ttlMs":120000}`, "invalid_request"},
			{`{}`, "invalid_request"},
		} {
			r := c.do("POST", "/v1/sandboxes/"+id+"/ttl", tc.body)
			if r.Status != 400 || r.JSON()["code"] != tc.code {
				t.Errorf("setTtl %s: %d %s, want 400 %s", tc.body, r.Status, r.Body, tc.code)
			}
		}
		if r := c.do("POST", "/v1/sandboxes/sbx_abc123/ttl", `{"ttlMs":60000}`); r.Status != 404 || r.JSON()["code"] != "not_found" {
			t.Errorf("setTtl of an unknown sandbox: %d %s", r.Status, r.Body)
		}
	})

	t.Run("kill", func(t *testing.T) {
		// const destroyed = await client.sandboxes.kill(sandbox.id)
		r := c.do("POST", "/v1/sandboxes/"+id+"/kill", nil)
		m := r.JSON()
		if r.Status != 200 || m["status"] != "destroyed" || m["destroyed_reason"] != "user_killed" || m["destroyed_at"] == nil {
			t.Fatalf("kill: %d %s", r.Status, r.Body)
		}
		again := c.do("POST", "/v1/sandboxes/"+id+"/kill", nil)
		if a := again.JSON(); again.Status != 200 || a["status"] != "destroyed" || a["destroyed_reason"] != "user_killed" || a["destroyed_at"] != m["destroyed_at"] {
			t.Errorf("kill of a destroyed sandbox: %d %s", again.Status, again.Body)
		}
		if r := c.do("POST", "/v1/sandboxes/"+id+"/ttl", `{"ttlMs":60000}`); r.Status != 409 || r.JSON()["code"] != "sandbox_destroyed" {
			t.Errorf("setTtl after kill: %d %s", r.Status, r.Body)
		}
		if listed(t, c, "/v1/sandboxes?limit=200", id) {
			t.Error("the default list shows a destroyed sandbox")
		}
		if !listed(t, c, "/v1/sandboxes?limit=200&include=destroyed,failed", id) {
			t.Error("include=destroyed,failed does not show it")
		}
		if r := c.do("POST", "/v1/sandboxes/sbx_abc123/kill", nil); r.Status != 404 || r.JSON()["code"] != "not_found" {
			t.Errorf("kill of an unknown sandbox: %d %s", r.Status, r.Body)
		}
	})
}

// TestCamelCaseCreateErrors: the create field limits and error codes, with
// camelCase names. None of these creates anything.
func TestCamelCaseCreateErrors(t *testing.T) {
	c := newClient(t)
	bigMeta := func(n, klen, vlen int) string {
		var parts []string
		for i := range n {
			k := strings.Repeat("k", klen-2) + string(rune('a'+i/26)) + string(rune('a'+i%26))
			parts = append(parts, `"`+k+`":"`+strings.Repeat("v", vlen)+`"`)
		}
		return `{"template":"python-node","metadata":{` + strings.Join(parts, ",") + `}}`
	}
	before := len(rowsOf(t, c, "/v1/sandboxes?limit=200&include=destroyed,failed"))
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"ttlMs over the plan limit", `{"template":"python-node","ttlMs":3600001}`, 400, "sandbox_ttl_exceeded"},
		{"ttlMs zero", `{"template":"python-node","ttlMs":0}`, 400, "invalid_request"},
		{"ttlMs negative", `{"template":"python-node","ttlMs":-1}`, 400, "invalid_request"},
		{"ttlMs not an integer", `{"template":"python-node","ttlMs":1.5}`, 400, "invalid_request"},
		{"ttlMs and ttl_ms differ", `{"template":"python-node","ttl_ms":60000,"ttlMs":120000}`, 400, "invalid_request"},
		{"17 metadata keys", bigMeta(17, 4, 1), 400, "invalid_request"},
		{"metadata key of 65 chars", bigMeta(1, 65, 1), 400, "invalid_request"},
		{"metadata value of 513 chars", bigMeta(1, 4, 513), 400, "invalid_request"},
		{"metadata over 4 KB", bigMeta(9, 10, 500), 400, "invalid_request"},
		{"unknown projectId", `{"template":"python-node","projectId":"prj_01K0000000000000000000000"}`, 404, "not_found"},
		{"projectId and project_id differ", `{"template":"python-node","projectId":"prj_a","project_id":"prj_b"}`, 400, "invalid_request"},
		{"unknown templateVersionId", `{"templateVersionId":"tplv_01K0000000000000000000000"}`, 404, "not_found"},
		{"templateVersionId of another slug", `{"template":"node","templateVersionId":"` + readyVersion(t, c, "python-node") + `"}`, 400, "invalid_request"},
		{"unknown template", `{"template":"no-such-template"}`, 404, "not_found"},
		{"unknown field", `{"template":"python-node","ttlMilliseconds":1000}`, 400, "invalid_request"},
		{"idempotency keys differ", `{"template":"python-node","idempotencyKey":"a","idempotency_key":"b"}`, 400, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do("POST", "/v1/sandboxes", tc.body)
			if r.Status != tc.status || r.JSON()["code"] != tc.code {
				t.Errorf("%s: %d %s, want %d %s", tc.body, r.Status, r.Body, tc.status, tc.code)
			}
		})
	}
	if after := len(rowsOf(t, c, "/v1/sandboxes?limit=200&include=destroyed,failed")); after != before {
		t.Errorf("refused creates changed the sandbox count: %d → %d", before, after)
	}
}

// TestCamelCaseCreateFields: templateVersionId, projectId and
// idempotencyKey under their camelCase names, and quota_exceeded.
func TestCamelCaseCreateFields(t *testing.T) {
	c := newClient(t)
	ensureTemplate(t, c, "python-node")
	created := func(t *testing.T, r response) map[string]any {
		t.Helper()
		if r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		m := r.JSON()
		id := m["id"].(string)
		t.Cleanup(func() { c.do("DELETE", "/v1/sandboxes/"+id, nil) })
		return m
	}

	t.Run("templateVersionId pins a version", func(t *testing.T) {
		v := readyVersion(t, c, "python-node")
		m := created(t, c.do("POST", "/v1/sandboxes", `{"templateVersionId":"`+v+`","ttlMs":60000}`))
		if m["template_version_id"] != v || m["template"] != "python-node" || m["template_slug"] != "python-node" {
			t.Errorf("pinned create: %v", m)
		}
	})

	t.Run("projectId", func(t *testing.T) {
		r := c.do("POST", "/v1/projects", map[string]any{"name": "camel-" + randHex(4)})
		if r.Status != 201 {
			t.Fatalf("create project: %d %s", r.Status, r.Body)
		}
		prj := r.JSON()["id"].(string)
		m := created(t, c.do("POST", "/v1/sandboxes", `{"template":"python-node","ttlMs":60000,"projectId":"`+prj+`"}`))
		if m["project_id"] != prj {
			t.Errorf("project_id %v, want %s", m["project_id"], prj)
		}
		for _, q := range []string{"project_id", "projectId"} {
			rows := rowsOf(t, c, "/v1/sandboxes?"+q+"="+prj)
			if len(rows) != 1 || rows[0]["id"] != m["id"] {
				t.Errorf("?%s=%s: %v", q, prj, rows)
			}
		}
	})

	t.Run("idempotencyKey", func(t *testing.T) {
		k := "camel-" + randHex(6)
		body := `{"template":"python-node","ttlMs":60000,"idempotencyKey":"` + k + `"}`
		first := created(t, c.do("POST", "/v1/sandboxes", body))
		r := c.do("POST", "/v1/sandboxes", body)
		if r.Status != 201 || r.JSON()["id"] != first["id"] || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("retry with the same key: %d %s", r.Status, r.Body)
		}
		// The same key in the header is the same request.
		r = c.doKey("POST", "/v1/sandboxes", k, map[string]any{"template": "python-node", "ttlMs": 60000})
		if r.Status != 201 || r.JSON()["id"] != first["id"] {
			t.Errorf("same key as a header: %d %s", r.Status, r.Body)
		}
		r = c.do("POST", "/v1/sandboxes", `{"template":"node","ttlMs":60000,"idempotencyKey":"`+k+`"}`)
		if r.Status != 409 || r.JSON()["code"] != "idempotency_key_reused" {
			t.Errorf("same key, other body: %d %s", r.Status, r.Body)
		}
	})

	t.Run("quota_exceeded", func(t *testing.T) {
		orgID, oc := createOrg(t, c, "camel-"+randHex(4))
		if r := c.do("PUT", "/v1/orgs/"+orgID+"/quotas", map[string]any{"max_sandboxes": 1}); r.Status != 200 {
			t.Fatalf("set quota: %d %s", r.Status, r.Body)
		}
		r := oc.do("POST", "/v1/sandboxes", `{"template":"python-node","ttlMs":60000}`)
		if r.Status != 201 {
			t.Fatalf("first create: %d %s", r.Status, r.Body)
		}
		first := r.JSON()["id"].(string)
		t.Cleanup(func() { oc.do("DELETE", "/v1/sandboxes/"+first, nil) })
		if r := oc.do("POST", "/v1/sandboxes", `{"template":"python-node","ttlMs":60000}`); r.Status != 429 || r.JSON()["code"] != "quota_exceeded" {
			t.Errorf("second create over max_sandboxes 1: %d %s", r.Status, r.Body)
		}
	})
}

// readyVersion is the newest ready version ID of slug.
func readyVersion(t *testing.T, c *client, slug string) string {
	t.Helper()
	for _, v := range rowsOf(t, c, "/v1/templates/"+slug+"/versions") {
		if v["status"] == "ready" {
			return v["id"].(string)
		}
	}
	t.Fatalf("%s has no ready version", slug)
	return ""
}

// rowsOf GETs a {"rows": [...]} list.
func rowsOf(t *testing.T, c *client, path string) []map[string]any {
	t.Helper()
	r := c.do("GET", path, nil)
	if r.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	var out []map[string]any
	rows, _ := r.JSON()["rows"].([]any)
	for _, row := range rows {
		out = append(out, row.(map[string]any))
	}
	return out
}
