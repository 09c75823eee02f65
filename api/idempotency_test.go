package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMutatingOperationsTakeIdempotencyKey: every POST, PUT, PATCH and
// DELETE under /v1 documents the Idempotency-Key header and the 409 its
// conflicts answer, since the server applies it to all of them.
func TestMutatingOperationsTakeIdempotencyKey(t *testing.T) {
	doc, _ := load(t)
	if _, ok := doc.Components.Parameters["IdempotencyKey"]; !ok {
		t.Fatal("components.parameters.IdempotencyKey missing")
	}
	for path, ops := range doc.Paths {
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		for method, raw := range ops {
			switch method {
			case "post", "put", "patch", "delete":
			default:
				continue
			}
			var op struct {
				Parameters []map[string]any `json:"parameters"`
				Responses  map[string]any   `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range op.Parameters {
				found = found || p["$ref"] == "#/components/parameters/IdempotencyKey"
			}
			if !found {
				t.Errorf("%s %s does not document Idempotency-Key", method, path)
			}
			if _, ok := op.Responses["409"]; !ok {
				t.Errorf("%s %s does not document 409", method, path)
			}
		}
	}
}
