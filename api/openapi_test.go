package api

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

// restContract lists every operation of the REST contract (notes/rest.md,
// issue 2) with the statuses it answers. The document must describe each.
var restContract = []struct {
	method, path string
	statuses     []string
}{
	{"get", "/healthz", []string{"200"}},
	{"get", "/v1/openapi.json", []string{"200"}},
	{"post", "/v1/sandboxes", []string{"201", "202", "400", "401", "404"}},
	{"get", "/v1/sandboxes", []string{"200", "400", "401"}},
	{"get", "/v1/sandboxes/{id}", []string{"200", "401", "404"}},
	{"delete", "/v1/sandboxes/{id}", []string{"202", "401", "404"}},
	{"post", "/v1/sandboxes/{id}/exec", []string{"200", "400", "401", "404", "409"}},
	{"get", "/v1/sandboxes/{id}/files", []string{"200", "400", "401", "404", "409"}},
	{"put", "/v1/sandboxes/{id}/files", []string{"200", "400", "401", "404", "409", "507"}},
	{"delete", "/v1/sandboxes/{id}/files", []string{"204", "401", "404"}},
	{"post", "/v1/sandboxes/{id}/files/mkdir", []string{"200", "400", "401", "404"}},
	{"get", "/v1/templates", []string{"200", "401"}},
	{"get", "/v1/templates/{slug}", []string{"200", "401", "404"}},
	{"post", "/v1/templates/{slug}/build", []string{"202", "401", "404"}},
	{"post", "/v1/orgs", []string{"201", "400", "401", "403"}},
}

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
	for _, s := range []string{"Sandbox", "Error", "CreateSandbox", "ExecRequest", "ExecResult", "ExecEvent", "FileEntry", "Template", "SandboxList", "TemplateList"} {
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
