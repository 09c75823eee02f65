package api

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// restContract lists every operation of the REST contract with the
// statuses it answers. The document must describe each.
var restContract = []struct {
	method, path string
	statuses     []string
}{
	{"get", "/healthz", []string{"200"}},
	{"get", "/metrics", []string{"200", "401", "403"}},
	{"get", "/v1/openapi.json", []string{"200"}},
	{"get", "/v1/hosts", []string{"200", "401"}},
	{"post", "/v1/hosts/{id}/drain", []string{"200", "401", "403", "404", "409"}},
	{"post", "/v1/hosts/{id}/undrain", []string{"200", "401", "403", "404", "409"}},
	{"post", "/v1/sandboxes", []string{"201", "202", "400", "401", "404", "409", "413"}},
	{"get", "/v1/sandboxes", []string{"200", "400", "401"}},
	{"get", "/v1/sandboxes/{id}", []string{"200", "401", "404"}},
	{"delete", "/v1/sandboxes/{id}", []string{"202", "401", "404", "409"}},
	{"patch", "/v1/sandboxes/{id}", []string{"200", "400", "401", "404", "409"}},
	{"patch", "/v1/sandboxes/{id}/env", []string{"200", "400", "401", "404", "413"}},
	{"patch", "/v1/sandboxes/{id}/network", []string{"200", "400", "401", "404"}},
	{"get", "/v1/sandboxes/{id}/children", []string{"200", "401", "404"}},
	{"post", "/v1/sandboxes/{id}/resize", []string{"200", "202", "400", "401", "404", "409"}},
	{"get", "/v1/sandboxes/{id}/preview-urls/{port}", []string{"200", "400", "401", "404", "503"}},
	{"post", "/v1/sandboxes/{id}/preview-urls/{port}", []string{"200", "400", "401", "404"}},
	{"delete", "/v1/sandboxes/{id}/preview-urls/{port}", []string{"204", "400", "401", "404"}},
	{"get", "/v1/sandboxes/{id}/metrics", []string{"200", "401", "404", "409"}},
	{"get", "/v1/sandboxes/{id}/usage", []string{"200", "400", "401", "404"}},
	{"post", "/v1/sandboxes/{id}/stop", lifecycleStatuses},
	{"post", "/v1/sandboxes/{id}/pause", lifecycleStatuses},
	{"post", "/v1/sandboxes/{id}/start", lifecycleStatuses},
	{"post", "/v1/sandboxes/{id}/resume", lifecycleStatuses},
	{"post", "/v1/sandboxes/{id}/archive", lifecycleStatuses},
	{"post", "/v1/sandboxes/{id}/snapshots", []string{"201", "400", "401", "404", "409", "503"}},
	{"get", "/v1/sandboxes/{id}/snapshots", []string{"200", "401", "404"}},
	{"get", "/v1/snapshots/{snap}", []string{"200", "401", "404"}},
	{"delete", "/v1/snapshots/{snap}", []string{"204", "401", "404", "409"}},
	{"post", "/v1/sandboxes/{id}/restore", []string{"200", "202", "400", "401", "404", "409"}},
	{"post", "/v1/sandboxes/{id}/fork", []string{"201", "202", "400", "401", "404", "409", "429"}},
	{"post", "/v1/sandboxes/{id}/backups", []string{"202", "400", "401", "404", "409", "503"}},
	{"get", "/v1/sandboxes/{id}/backups", []string{"200", "401", "404"}},
	{"post", "/v1/sandboxes/{id}/exec", []string{"200", "400", "401", "404", "409"}},
	{"post", "/v1/sandboxes/{id}/processes", []string{"200", "201", "400", "401", "404", "409"}},
	{"get", "/v1/sandboxes/{id}/processes", []string{"200", "401", "404", "409"}},
	{"delete", "/v1/sandboxes/{id}/processes/{pid}", []string{"204", "400", "401", "404", "409"}},
	{"get", "/v1/sandboxes/{id}/processes/{pid}/stream", []string{"200", "400", "401", "404", "409"}},
	{"get", "/v1/sandboxes/{id}/pty", []string{"101", "401", "404", "409"}},
	{"post", "/v1/sandboxes/{id}/processes/{pid}/input", []string{"204", "400", "401", "404", "409"}},
	{"post", "/v1/sandboxes/{id}/processes/{pid}/signal", []string{"204", "400", "401", "404", "409"}},
	{"post", "/v1/sandboxes/{id}/processes/{pid}/resize", []string{"204", "400", "401", "404", "409"}},
	{"post", "/v1/sandboxes/{id}/code", []string{"200", "400", "401", "404", "409", "413"}},
	{"post", "/v1/sandboxes/{id}/code/contexts", []string{"201", "400", "401", "404", "409"}},
	{"get", "/v1/sandboxes/{id}/code/contexts", []string{"200", "401", "404", "409"}},
	{"delete", "/v1/sandboxes/{id}/code/contexts/{ctx}", []string{"204", "401", "404", "409"}},
	{"post", "/v1/sandboxes/{id}/code/contexts/{ctx}/restart", []string{"200", "401", "404", "409"}},
	{"post", "/v1/sandboxes/{id}/code/contexts/{ctx}/interrupt", []string{"200", "401", "404", "409"}},
	{"get", "/v1/sandboxes/{id}/code/executions", []string{"200", "401", "404", "409"}},
	{"delete", "/v1/sandboxes/{id}/code/executions/{exec}", []string{"204", "401", "404", "409"}},
	{"get", "/v1/sandboxes/{id}/files", []string{"200", "400", "401", "404", "409"}},
	{"put", "/v1/sandboxes/{id}/files", []string{"200", "400", "401", "404", "409", "507"}},
	{"delete", "/v1/sandboxes/{id}/files", []string{"204", "401", "404"}},
	{"post", "/v1/sandboxes/{id}/files/mkdir", []string{"200", "400", "401", "404"}},
	{"get", "/v1/templates", []string{"200", "401"}},
	{"get", "/v1/templates/{slug}", []string{"200", "401", "404"}},
	{"post", "/v1/templates/{slug}/build", []string{"202", "401", "404"}},
	{"get", "/v1/templates/{slug}/versions", []string{"200", "401", "404"}},
	{"post", "/v1/templates/{slug}/builds", []string{"202", "401", "404"}},
	{"post", "/v1/templates", []string{"202", "400", "401", "403", "404", "409"}},
	{"post", "/v1/templates/uploads", []string{"201", "400", "401", "413"}},
	{"delete", "/v1/templates/{slug}", []string{"200", "401", "403", "404", "409"}},
	{"delete", "/v1/templates/{slug}/versions/{version_id}", []string{"200", "401", "403", "404", "409"}},
	{"get", "/v1/templates/{slug}/builds/{build_id}", []string{"200", "401", "404"}},
	{"get", "/v1/templates/{slug}/builds/{build_id}/logs", []string{"200", "400", "401", "404"}},
	{"put", "/v1/registry-credentials/{registry}", []string{"200", "400", "401", "403"}},
	{"get", "/v1/registry-credentials", []string{"200", "401", "403"}},
	{"delete", "/v1/registry-credentials/{registry}", []string{"204", "401", "404"}},
	{"post", "/v1/sandboxes/{id}/kill", []string{"200", "401", "404", "409"}},
	{"post", "/v1/sandboxes/{id}/ttl", []string{"200", "400", "401", "404", "409"}},
	{"post", "/v1/orgs", []string{"201", "400", "401", "403"}},
	{"delete", "/v1/orgs/{id}", []string{"202", "401", "403", "404", "409"}},
	{"get", "/v1/orgs/{id}/quotas", []string{"200", "401", "404"}},
	{"put", "/v1/orgs/{id}/quotas", []string{"200", "400", "401", "403", "404", "409"}},
	{"post", "/v1/projects", []string{"201", "400", "401", "403", "409"}},
	{"get", "/v1/projects", []string{"200", "401"}},
	{"get", "/v1/projects/{id}", []string{"200", "401", "404"}},
	{"post", "/v1/tokens", []string{"201", "400", "401", "403", "404"}},
	{"post", "/v1/sessions", []string{"200", "202", "400", "401", "403", "404"}},
	{"get", "/v1/sessions", []string{"200", "401"}},
	{"get", "/v1/sessions/status", []string{"200", "400", "401", "404"}},
	{"get", "/api/sandbox/status", []string{"200", "400", "401", "404"}},
	{"get", "/v1/sessions/{id}", []string{"200", "400", "401", "404"}},
	{"delete", "/v1/sessions/{id}", []string{"200", "202", "401", "404"}},
	{"post", "/v1/sessions/{id}/exec", []string{"200", "400", "401", "404", "409"}},
	{"get", "/v1/sessions/{id}/files", []string{"200", "401", "404", "409"}},
	{"put", "/v1/sessions/{id}/files", []string{"200", "401", "404", "409"}},
	{"delete", "/v1/sessions/{id}/files", []string{"204", "401", "404", "409"}},
	{"post", "/v1/sessions/{id}/files/mkdir", []string{"200", "401", "404", "409"}},
	{"get", "/v1/pools", []string{"200", "401"}},
	{"put", "/v1/pools/{template}", []string{"200", "400", "401", "403", "404"}},
	{"get", "/v1/events", []string{"200", "400", "401", "403"}},
	{"post", "/v1/webhooks", []string{"201", "400", "401", "403", "409"}},
	{"get", "/v1/webhooks", []string{"200", "401", "403"}},
	{"get", "/v1/webhooks/{id}", []string{"200", "401", "404"}},
	{"delete", "/v1/webhooks/{id}", []string{"204", "401", "404"}},
	{"get", "/v1/webhooks/{id}/deliveries", []string{"200", "400", "401", "404"}},
	{"post", "/v1/sandboxes/{id}/artifacts", []string{"201", "400", "401", "403", "404", "409", "503"}},
	{"get", "/v1/artifacts", []string{"200", "401", "403"}},
	{"get", "/v1/artifacts/{id}", []string{"200", "401", "404"}},
	{"delete", "/v1/artifacts/{id}", []string{"204", "401", "404"}},
	{"get", "/v1/artifacts/{id}/content", []string{"200", "401", "404"}},
}

// lifecycleStatuses are what stop, start, archive and their aliases answer:
// 200 done (or no-op), 202 wait ran out, 409 wrong state (docs/lifecycle.md).
var lifecycleStatuses = []string{"200", "202", "400", "401", "404", "409"}

type document struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas         map[string]any `json:"schemas"`
		Responses       map[string]any `json:"responses"`
		Parameters      map[string]any `json:"parameters"`
		SecuritySchemes map[string]any `json:"securitySchemes"`
	} `json:"components"`
	Security []map[string][]string `json:"security"`
}

func load(t *testing.T) (document, []byte) {
	t.Helper()
	js, err := OpenAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(js) {
		t.Fatal("OpenAPIJSON is not valid JSON")
	}
	var doc document
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	return doc, js
}

func TestOpenAPIMatchesYAML(t *testing.T) {
	var fromYAML any
	if err := yaml.Unmarshal(OpenAPIYAML, &fromYAML); err != nil {
		t.Fatalf("openapi.yaml does not parse: %v", err)
	}
	_, js := load(t)
	var fromJSON any
	if err := json.Unmarshal(js, &fromJSON); err != nil {
		t.Fatal(err)
	}
	// Round-trip yaml.v3's own decoding through JSON so both sides use
	// JSON's types (float64 numbers, string keys).
	b, err := json.Marshal(fromYAML)
	if err != nil {
		t.Fatal(err)
	}
	var want any
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, fromJSON); diff != "" {
		t.Errorf("OpenAPIJSON differs from the YAML (-yaml +json):\n%s", diff)
	}
	again, _ := OpenAPIJSON()
	if &again[0] != &js[0] {
		t.Error("OpenAPIJSON is not cached")
	}
	if !strings.HasPrefix(string(js), `{"openapi":"3.1.0","info":`) {
		t.Errorf("JSON does not keep the YAML's key order: %.40s", js)
	}
}

func TestOpenAPICoversContract(t *testing.T) {
	doc, _ := load(t)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	if _, ok := doc.Components.SecuritySchemes["bearer"]; !ok || len(doc.Security) != 1 || doc.Security[0]["bearer"] == nil {
		t.Error("bearer security is not the default")
	}
	for _, s := range []string{"Sandbox", "Error", "CreateSandbox", "ExecRequest", "ExecResult", "ExecEvent", "ProcessStartRequest", "Process", "FileEntry", "Template", "SandboxList", "TemplateList"} {
		if _, ok := doc.Components.Schemas[s]; !ok {
			t.Errorf("schema %s missing", s)
		}
	}
	var want, got []string
	for _, op := range restContract {
		want = append(want, op.method+" "+op.path)
		ops, ok := doc.Paths[op.path]
		if !ok {
			t.Errorf("path %s missing", op.path)
			continue
		}
		raw, ok := ops[op.method]
		if !ok {
			t.Errorf("%s %s missing", op.method, op.path)
			continue
		}
		var o map[string]any
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		resp, _ := o["responses"].(map[string]any)
		for _, st := range op.statuses {
			if _, ok := resp[st]; !ok {
				t.Errorf("%s %s: response %s missing", op.method, op.path, st)
			}
		}
		if id, _ := o["operationId"].(string); id == "" {
			t.Errorf("%s %s has no operationId", op.method, op.path)
		}
	}
	for p, ops := range doc.Paths {
		for m := range ops {
			if m != "parameters" {
				got = append(got, m+" "+p)
			}
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operations differ from the contract (-contract +document):\n%s", diff)
	}
}

// TestOpenAPIRefsResolve checks every $ref points at a defined component.
func TestOpenAPIRefsResolve(t *testing.T) {
	_, js := load(t)
	var root map[string]any
	if err := json.Unmarshal(js, &root); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	n := 0
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				n++
				var cur any = root
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, _ := cur.(map[string]any)
					cur = m[part]
				}
				if !strings.HasPrefix(ref, "#/") || cur == nil {
					t.Errorf("$ref %q does not resolve", ref)
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(root)
	if n == 0 {
		t.Error("no $ref found; the walk is broken")
	}
}

func TestYAMLToJSON(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{"a: 1\nb: [x, 2.5, true, null]\n\"200\": {c: d}\n", `{"a":1,"b":["x",2.5,true,null],"200":{"c":"d"}}`, false},
		{"z: 1\na: 2\n", `{"z":1,"a":2}`, false},
		{"t: 2026-11-29\nq: '1'\nh: 0x10\n", `{"t":"2026-11-29","q":"1","h":16}`, false},
		{"base: &b {x: 1}\nuse: *b\n", `{"base":{"x":1},"use":{"x":1}}`, false},
		{"a: .inf\n", "", true},
		{"a: 1\na: 2\n", "", true},
		{"a: [\n", "", true},
	}
	for _, tt := range tests {
		got, err := yamlToJSON([]byte(tt.in))
		if (err != nil) != tt.wantErr || string(got) != tt.want {
			t.Errorf("yamlToJSON(%q) = %s, %v; want %s (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// resolve follows v's $ref (if any) within root.
func resolve(t *testing.T, root map[string]any, v any) map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	for range 8 {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		var cur any = root
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			c, _ := cur.(map[string]any)
			cur = c[part]
		}
		m, _ = cur.(map[string]any)
	}
	t.Fatalf("$ref chain too long at %v", v)
	return nil
}

// TestOpenAPILifecycle checks the stop/start/archive contract of docs/stop-start.md:
// each call's wait_for_state names the state it leads to, a wait that runs
// out is a 202 with Retry-After and wait_timed_out (a start's 202 may
// also be code relocating), and a wrong state is a 409 conflict carrying
// the state.
func TestOpenAPILifecycle(t *testing.T) {
	_, js := load(t)
	var root map[string]any
	if err := json.Unmarshal(js, &root); err != nil {
		t.Fatal(err)
	}
	paths := root["paths"].(map[string]any)
	tests := []struct {
		verb string
		wait string
	}{
		{"stop", "stopped"}, {"pause", "stopped"},
		{"start", "running"}, {"resume", "running"},
		{"archive", "archived"},
	}
	for _, tt := range tests {
		t.Run(tt.verb, func(t *testing.T) {
			op := resolve(t, root, resolve(t, root, paths["/v1/sandboxes/{id}/"+tt.verb])["post"])
			params := map[string]map[string]any{}
			for _, p := range op["parameters"].([]any) {
				p := resolve(t, root, p)
				params[p["name"].(string)] = p
			}
			wait := params["wait_for_state"]
			if wait == nil || wait["in"] != "query" {
				t.Fatalf("wait_for_state query parameter missing: %v", params)
			}
			if got := resolve(t, root, wait["schema"])["enum"]; !cmp.Equal(got, []any{tt.wait}) {
				t.Errorf("wait_for_state enum = %v, want [%s]", got, tt.wait)
			}
			if params["wait_timeout_ms"] == nil {
				t.Error("wait_timeout_ms parameter missing")
			}
			resp := op["responses"].(map[string]any)
			ok := resolve(t, root, resp["200"])
			if s := resolve(t, root, ok["content"].(map[string]any)["application/json"].(map[string]any)["schema"]); s["properties"].(map[string]any)["restore"] == nil {
				t.Errorf("200 is not a Sandbox: %v", s)
			}
			acc := resolve(t, root, resp["202"])
			if h, _ := acc["headers"].(map[string]any); h["Retry-After"] == nil {
				t.Error("202 lacks Retry-After")
			}
			s := resolve(t, root, acc["content"].(map[string]any)["application/json"].(map[string]any)["schema"])
			alts := []any{s}
			if one, ok := s["oneOf"].([]any); ok {
				alts = nil
				for _, a := range one {
					alts = append(alts, resolve(t, root, a))
				}
			}
			b, _ := json.Marshal(alts)
			if !strings.Contains(string(b), "wait_timed_out") {
				t.Errorf("202 schema lacks wait_timed_out: %s", b)
			}
			// A start the host's queue refuses may relocate (202 relocating).
			if tt.wait == "running" && !strings.Contains(string(b), `"relocating"`) {
				t.Errorf("202 schema of %s lacks code relocating: %s", tt.verb, b)
			}
			conflict := resolve(t, root, resp["409"])
			if d, _ := conflict["description"].(string); !strings.Contains(d, "`conflict`") || !strings.Contains(d, "`state`") {
				t.Errorf("409 description = %q, want the conflict code and state", d)
			}
		})
	}
}

// TestOpenAPISandboxRetention checks the record and create body carry the
// lifecycle fields, and the documented retention defaults match docs/lifecycle.md.
func TestOpenAPISandboxRetention(t *testing.T) {
	doc, js := load(t)
	var root map[string]any
	if err := json.Unmarshal(js, &root); err != nil {
		t.Fatal(err)
	}
	props := func(schema string) map[string]any {
		s := resolve(t, root, doc.Components.Schemas[schema])
		p, _ := s["properties"].(map[string]any)
		return p
	}
	sb := props("Sandbox")
	for _, f := range []string{"type", "auto_stop_minutes", "auto_archive_days", "auto_delete_days", "expires_at", "deleted_reason", "restore", "ram_restored"} {
		if sb[f] == nil {
			t.Errorf("Sandbox lacks %s", f)
		}
	}
	if got := resolve(t, root, sb["deleted_reason"])["enum"]; !cmp.Equal(got, []any{"user_deleted", "user_killed", "auto_deleted", "ttl_expired", "platform_deleted",
		"session_stopped", "session_failed", "pool_discarded", "pool_drained", "host_lost", "org_deleted"}) {
		t.Errorf("deleted_reason enum = %v", got)
	}
	if got := resolve(t, root, sb["restore"])["enum"]; !cmp.Equal(got, []any{"memory", "disk_only"}) {
		t.Errorf("restore enum = %v", got)
	}
	create := props("CreateSandbox")
	for _, f := range []string{"type", "auto_stop_minutes", "auto_archive_days", "auto_delete_days"} {
		if create[f] == nil {
			t.Errorf("CreateSandbox lacks %s", f)
		}
	}
	typ := resolve(t, root, doc.Components.Schemas["SandboxType"])
	if got := typ["enum"]; !cmp.Equal(got, []any{"persistent", "ephemeral", "dev"}) {
		t.Errorf("SandboxType enum = %v", got)
	}
	desc, _ := typ["description"].(string)
	for _, row := range []string{
		"| `persistent` | 60 min | 7 days | never |",
		"| `ephemeral` | 15 min | — | when it stops |",
		"| `dev` | 120 min | 30 days | never |",
		"0 disables",
	} {
		if !strings.Contains(desc, row) {
			t.Errorf("SandboxType description lacks %q", row)
		}
	}
}

// TestOpenAPISandboxCalls checks the shapes the guide shows for rename,
// env, parent/child, resize, metrics and usage: fields, enums and error
// codes.
func TestOpenAPISandboxCalls(t *testing.T) {
	doc, js := load(t)
	var root map[string]any
	if err := json.Unmarshal(js, &root); err != nil {
		t.Fatal(err)
	}
	schema := func(name string) map[string]any { return resolve(t, root, doc.Components.Schemas[name]) }
	props := func(s map[string]any) map[string]any {
		p, _ := s["properties"].(map[string]any)
		return p
	}
	// allProps merges the properties of an allOf.
	allProps := func(s map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range props(s) {
			out[k] = v
		}
		all, _ := s["allOf"].([]any)
		for _, part := range all {
			for k, v := range props(resolve(t, root, part)) {
				out[k] = v
			}
		}
		return out
	}
	has := func(where string, p map[string]any, fields ...string) {
		t.Helper()
		for _, f := range fields {
			if p[f] == nil {
				t.Errorf("%s lacks %s", where, f)
			}
		}
	}
	enum := func(where string, v any, want ...any) {
		t.Helper()
		if got := resolve(t, root, v)["enum"]; !cmp.Equal(got, want) {
			t.Errorf("%s enum = %v, want %v", where, got, want)
		}
	}

	has("Sandbox", props(schema("Sandbox")), "parent_id", "auto_resume")
	if req, _ := schema("Sandbox")["required"].([]any); !slices.Contains(req, any("parent_id")) || !slices.Contains(req, any("auto_resume")) {
		t.Errorf("Sandbox does not require parent_id and auto_resume: %v", req)
	}
	has("CreateSandbox", props(schema("CreateSandbox")), "parent_id", "auto_resume")

	upd := props(schema("UpdateSandbox"))
	has("UpdateSandbox", upd, "name", "auto_resume")
	if typ, _ := resolve(t, root, upd["name"])["type"].([]any); !slices.Contains(typ, any("null")) {
		t.Errorf("UpdateSandbox.name type = %v, want it nullable (null clears the name)", typ)
	}
	env := resolve(t, root, props(schema("EnvPatch"))["env"])
	if typ, _ := resolve(t, root, env["additionalProperties"])["type"].([]any); !slices.Contains(typ, any("null")) {
		t.Errorf("EnvPatch values type = %v, want string or null (null removes)", typ)
	}
	envRes := props(schema("EnvResult"))
	has("EnvResult", envRes, "id", "state", "env_keys", "applies")
	if envRes["env"] != nil {
		t.Error("EnvResult has env: values must never be echoed")
	}
	enum("EnvResult.applies", envRes["applies"], "next_exec", "next_start")

	has("ResizeRequest", props(schema("ResizeRequest")), "cpu", "ram_mb", "disk_gb")
	res := props(schema("ResizeResult"))
	has("ResizeResult", res, "id", "state", "cpu", "ram_mb", "disk_gb", "applies_at", "requested", "partial", "live")
	enum("ResizeResult.applies_at", res["applies_at"], "now", "next_start", "pending")
	has("LiveResize", props(resolve(t, root, res["live"])), "max_cpu", "max_ram_mb", "guest_cpus_online", "guest_mem_total_mb")
	nr := allProps(schema("NotResizableError"))
	has("NotResizableError", nr, "code", "error", "live_resize", "hint")
	has("NotResizableError.live_resize", props(resolve(t, root, nr["live_resize"])), "supported", "reason")
	hint := props(resolve(t, root, nr["hint"]))
	has("NotResizableError.hint", hint, "action", "applies_at", "steps")
	enum("hint.action", hint["action"], "stop_then_resize")
	enum("hint.applies_at", hint["applies_at"], "restart")

	has("SandboxMetrics", props(schema("SandboxMetrics")), "cpu_percent", "memory_used_bytes", "memory_limit_bytes",
		"disk_used_bytes", "disk_size_bytes", "net_rx_bytes", "net_tx_bytes", "pids", "at")
	usage := props(schema("SandboxUsage"))
	has("SandboxUsage", usage, "id", "from", "to", "cpu_seconds", "ram_gb_seconds", "storage_gb_hours", "periods")
	has("UsagePeriod", props(schema("UsagePeriod")), "state", "from", "to", "cpu", "ram_mb", "disk_gb")

	codes, _ := props(schema("Error"))["code"].(map[string]any)["enum"].([]any)
	for _, c := range []string{"env_too_large", "env_var_too_large", "sandbox_not_resizable", "disk_grow_unsupported", "conflict"} {
		if !slices.Contains(codes, any(c)) {
			t.Errorf("Error.code lacks %s", c)
		}
	}
	has("Error", props(schema("Error")), "children")

	paths := root["paths"].(map[string]any)
	op := func(method, path string) map[string]any {
		return resolve(t, root, resolve(t, root, paths[path])[method])
	}
	params := map[string]map[string]any{}
	for _, p := range op("get", "/v1/sandboxes")["parameters"].([]any) {
		p := resolve(t, root, p)
		params[p["name"].(string)] = p
	}
	for _, name := range []string{"parent_id", "roots_only", "metadata"} {
		if params[name] == nil || params[name]["in"] != "query" {
			t.Errorf("list lacks the %s query parameter", name)
		}
	}
	if params["metadata"]["style"] != "deepObject" {
		t.Errorf("metadata style = %v, want deepObject (metadata[KEY]=VALUE)", params["metadata"]["style"])
	}
	for _, name := range []string{"from", "to"} {
		found := false
		for _, p := range op("get", "/v1/sandboxes/{id}/usage")["parameters"].([]any) {
			found = found || resolve(t, root, p)["name"] == name
		}
		if !found {
			t.Errorf("usage lacks the %s parameter", name)
		}
	}
	conflict := resolve(t, root, op("post", "/v1/sandboxes/{id}/resize")["responses"].(map[string]any)["409"])
	if d, _ := conflict["description"].(string); !strings.Contains(d, "`sandbox_not_resizable`") || !strings.Contains(d, "`disk_grow_unsupported`") {
		t.Errorf("resize 409 description = %q, want both codes", d)
	}
	del := resolve(t, root, op("delete", "/v1/sandboxes/{id}")["responses"].(map[string]any)["409"])
	if d, _ := del["description"].(string); !strings.Contains(d, "`children`") {
		t.Errorf("delete 409 description = %q, want it to name the children field", d)
	}
}
