package e2e

import (
	"fmt"
	"strings"
	"testing"
)

func TestCreateBadInput(t *testing.T) {
	c := newClient(t)
	before := c.do("GET", "/v1/sandboxes?paginated=true&limit=200", nil).JSON()["total"]
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
		field      string
	}{
		{"malformed json", `{"template":`, 400, "invalid_request", ""},
		{"not an object", `[1,2]`, 400, "invalid_request", ""},
		{"trailing data", `{"template":"busybox"} {}`, 400, "invalid_request", ""},
		{"empty body", ``, 400, "invalid_request", ""},
		{"unknown field", `{"template":"busybox","bogus":1}`, 400, "invalid_request", "bogus"},
		// A create without template takes the server's default;
		// see TestTemplatesDefaultAndSessionTTL.
		{"template wrong type", `{"template":5}`, 400, "invalid_request", "template"},
		{"unknown template", `{"template":"no-such-template"}`, 404, "not_found", "template"},
		{"cpu zero", `{"template":"busybox","cpu":0}`, 400, "invalid_request", "cpu"},
		{"cpu negative", `{"template":"busybox","cpu":-1}`, 400, "invalid_request", "cpu"},
		{"cpu too big", `{"template":"busybox","cpu":1000}`, 400, "invalid_request", "cpu"},
		{"cpu string", `{"template":"busybox","cpu":"2"}`, 400, "invalid_request", "cpu"},
		{"ram below 128", `{"template":"busybox","ram_mb":127}`, 400, "invalid_request", "ram_mb"},
		{"ram fraction", `{"template":"busybox","ram_mb":256.5}`, 400, "invalid_request", "ram_mb"},
		{"disk zero", `{"template":"busybox","disk_gb":0}`, 400, "invalid_request", "disk_gb"},
		{"disk negative", `{"template":"busybox","disk_gb":-3}`, 400, "invalid_request", "disk_gb"},
		{"bad name", `{"template":"busybox","name":"has space"}`, 400, "invalid_request", "name"},
		{"env bad key", `{"template":"busybox","env":{"1X":"v"}}`, 400, "invalid_request", "env"},
		{"env not strings", `{"template":"busybox","env":{"A":1}}`, 400, "invalid_request", "env"},
		{"metadata too many", `{"template":"busybox","metadata":{` + manyKeys(17) + `}}`, 400, "invalid_request", "metadata"},
		// Every field with a value of the wrong type.
		{"ram string", `{"template":"busybox","ram_mb":"256"}`, 400, "invalid_request", "ram_mb"},
		{"disk string", `{"template":"busybox","disk_gb":"1"}`, 400, "invalid_request", "disk_gb"},
		{"disk fraction", `{"template":"busybox","disk_gb":1.5}`, 400, "invalid_request", "disk_gb"},
		{"name wrong type", `{"template":"busybox","name":5}`, 400, "invalid_request", "name"},
		{"env not an object", `{"template":"busybox","env":"A=1"}`, 400, "invalid_request", "env"},
		{"metadata not an object", `{"template":"busybox","metadata":["a"]}`, 400, "invalid_request", "metadata"},
		{"metadata not strings", `{"template":"busybox","metadata":{"a":1}}`, 400, "invalid_request", "metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do("POST", "/v1/sandboxes", tc.body)
			m := r.JSON()
			if r.Status != tc.status || m["code"] != tc.code {
				t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, tc.status, tc.code)
			}
			if tc.field != "" && m["field"] != tc.field {
				t.Errorf("field = %v, want %s (%s)", m["field"], tc.field, r.Body)
			}
			if msg, _ := m["error"].(string); msg == "" {
				t.Errorf("no error message: %s", r.Body)
			}
		})
	}
	if after := c.do("GET", "/v1/sandboxes?paginated=true&limit=200", nil).JSON()["total"]; after != before {
		t.Errorf("bad requests created sandboxes: total %v → %v", before, after)
	}
}

func manyKeys(n int) string {
	var parts []string
	for i := 0; i < n; i++ {
		parts = append(parts, `"k`+strings.Repeat("x", i)+`":"v"`)
	}
	return strings.Join(parts, ",")
}

func TestOtherBadInput(t *testing.T) {
	c := newClient(t)
	for _, tc := range []struct {
		method, path string
		body         any
		status       int
		code         string
	}{
		{"GET", "/v1/sandboxes?limit=201", nil, 400, "invalid_request"},
		{"GET", "/v1/sandboxes?limit=0", nil, 400, "invalid_request"},
		{"GET", "/v1/sandboxes?limit=abc", nil, 400, "invalid_request"},
		{"GET", "/v1/sandboxes?offset=-1", nil, 400, "invalid_request"},
		{"GET", "/v1/sandboxes?state=bogus", nil, 400, "invalid_request"},
		{"GET", "/v1/sandboxes/sbx_01KZZZZZZZZZZZZZZZZZZZZZZZ", nil, 404, "not_found"},
		{"GET", "/v1/sandboxes/not-an-id", nil, 404, "not_found"},
		{"DELETE", "/v1/sandboxes/sbx_01KZZZZZZZZZZZZZZZZZZZZZZZ", nil, 404, "not_found"},
		{"POST", "/v1/sandboxes/sbx_01KZZZZZZZZZZZZZZZZZZZZZZZ/exec", map[string]any{"cmd": "true"}, 404, "not_found"},
		{"POST", "/v1/sandboxes?wait_for_state=stopped", map[string]any{"template": "busybox"}, 400, "invalid_request"},
		{"POST", "/v1/sandboxes?wait_timeout_ms=-5&wait_for_state=running", map[string]any{"template": "busybox"}, 400, "invalid_request"},
		{"GET", "/v1/templates/nope", nil, 404, "not_found"},
		{"GET", "/v1/nope", nil, 404, "not_found"},
	} {
		r := c.do(tc.method, tc.path, tc.body)
		if r.Status != tc.status || r.JSON()["code"] != tc.code {
			t.Errorf("%s %s: %d %s, want %d %s", tc.method, tc.path, r.Status, r.Body, tc.status, tc.code)
		}
	}
	// Exec bad input on a real sandbox.
	id := c.create(map[string]any{"template": "busybox"})
	for _, body := range []string{`{}`, `{"cmd":[]}`, `{"cmd":""}`, `{"cmd":5}`, `{"cmd":"true","timeout_ms":-1}`, `{"cmd":"true","nope":1}`} {
		if r := c.do("POST", "/v1/sandboxes/"+id+"/exec", body); r.Status != 400 || r.JSON()["code"] != "invalid_request" {
			t.Errorf("exec %s: %d %s", body, r.Status, r.Body)
		}
	}
	if r := c.do("GET", "/v1/sandboxes/"+id+"/files", nil); r.Status != 400 {
		t.Errorf("files without path: %d %s", r.Status, r.Body)
	}
}

func TestAuth(t *testing.T) {
	c := newClient(t)
	for _, tok := range []string{"", "pt_wrong"} {
		anon := &client{t: t, token: tok}
		r := anon.do("GET", "/v1/sandboxes", nil)
		if r.Status != 401 || r.JSON()["code"] != "unauthorized" {
			t.Errorf("token %q: %d %s", tok, r.Status, r.Body)
		}
	}
	if r := (&client{t: t}).do("GET", "/healthz", nil); r.Status != 200 {
		t.Errorf("healthz without auth: %d", r.Status)
	}
	if r := (&client{t: t}).do("GET", "/v1/openapi.json", nil); r.Status != 200 || !strings.Contains(string(r.Body), `"openapi"`) {
		t.Errorf("openapi: %d", r.Status)
	}
	_ = c
}

func TestCrossOrgIs404(t *testing.T) {
	c := newClient(t)
	id := c.create(map[string]any{"template": "busybox"})
	_, other := createOrg(t, c, "other-"+randHex(3))
	ownPID := startBackground(t, c, id, map[string]any{"cmd": []string{"sleep", "600"}, "stdin": true})
	procPath := fmt.Sprintf("/v1/sandboxes/%s/processes/%d", id, ownPID)
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/sandboxes/" + id, nil},
		{"DELETE", "/v1/sandboxes/" + id, nil},
		{"POST", "/v1/sandboxes/" + id + "/exec", map[string]any{"cmd": "true"}},
		{"GET", "/v1/sandboxes/" + id + "/files?path=/etc/hostname", nil},
		{"PUT", "/v1/sandboxes/" + id + "/files?path=/x", "x"},
		{"DELETE", "/v1/sandboxes/" + id + "/files?path=/etc", nil},
		{"POST", "/v1/sandboxes/" + id + "/files/mkdir", map[string]any{"path": "/x"}},
		// The guide's sandbox calls: rename, env, resize, tree, metrics, usage.
		{"PATCH", "/v1/sandboxes/" + id, map[string]any{"name": "stolen"}},
		{"PATCH", "/v1/sandboxes/" + id + "/env", map[string]any{"env": map[string]any{"X": "1"}}},
		{"POST", "/v1/sandboxes/" + id + "/resize", map[string]any{"cpu": 2}},
		{"GET", "/v1/sandboxes/" + id + "/children", nil},
		{"GET", "/v1/sandboxes/" + id + "/metrics", nil},
		{"GET", "/v1/sandboxes/" + id + "/usage", nil},
		{"POST", "/v1/sandboxes", map[string]any{"template": "busybox", "parent_id": id}},
		// Processes: start, list, and the calls on the owner's own process.
		{"POST", "/v1/sandboxes/" + id + "/processes", map[string]any{"cmd": "true"}},
		{"GET", "/v1/sandboxes/" + id + "/processes", nil},
		{"GET", procPath + "/stream", nil},
		{"POST", procPath + "/input", map[string]any{"data": "x"}},
		{"POST", procPath + "/signal", map[string]any{"signal": "SIGTERM"}},
		{"POST", procPath + "/resize", map[string]any{"cols": 10, "rows": 10}},
		{"DELETE", procPath, nil},
	} {
		if r := other.do(tc.method, tc.path, tc.body); r.Status != 404 || r.JSON()["code"] != "not_found" {
			t.Errorf("other org %s %s: %d %s", tc.method, tc.path, r.Status, r.Body)
		}
	}
	if r := other.do("GET", "/v1/sandboxes", nil); strings.Contains(string(r.Body), id) {
		t.Errorf("other org's list shows the sandbox: %s", r.Body)
	}
	if r := other.do("GET", "/v1/sandboxes?parent_id="+id, nil); r.Status != 200 || strings.Contains(string(r.Body), `"id"`) {
		t.Errorf("other org's list by this parent: %d %s", r.Status, r.Body)
	}
	if _, ok := listPIDs(t, c, id)[ownPID]; !ok {
		t.Errorf("another org's calls ended process %d", ownPID)
	}
	if m := c.do("GET", "/v1/sandboxes/"+id, nil).JSON(); m["name"] == "stolen" || len(m["env_keys"].([]any)) != 0 || m["cpu"] != 1.0 {
		t.Errorf("another org's calls changed the sandbox: %v", m)
	}
	// A non-admin org cannot make orgs.
	if r := other.do("POST", "/v1/orgs", map[string]any{"name": "x"}); r.Status != 403 {
		t.Errorf("org token creating orgs: %d %s", r.Status, r.Body)
	}
	// The sandbox is untouched.
	if out := c.mustSh(id, "echo ok"); out != "ok\n" {
		t.Errorf("sandbox after other org's calls: %q", out)
	}
}
