package apicontract

import (
	"encoding/json"
	"slices"

	"github.com/getkin/kin-openapi/openapi3"
)

// undeclared lists the object keys of v (a decoded JSON answer) that its
// schema does not declare, as JSON paths. Schemas of answers stay open in
// the document (a client must tolerate new fields), so schema validation
// alone lets a field the code added and the document lacks through; this
// closes them for the tests. A key counts as declared when the schema or
// any of its allOf/anyOf/oneOf branches names it; an object schema with
// additionalProperties (a map), or with no properties at all (free-form),
// declares every key.
func undeclared(s *openapi3.Schema, v any, path string, out *[]string) {
	if s == nil {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		props, extra, open := declared(s)
		if len(props) == 0 && extra == nil {
			open = true
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := path + "." + k
			switch {
			case len(props[k]) > 0:
				// Declared in several branches: fine if any accepts it.
				best := []string(nil)
				for i, ps := range props[k] {
					var got []string
					undeclared(ps, x[k], p, &got)
					if i == 0 || len(got) < len(best) {
						best = got
					}
				}
				*out = append(*out, best...)
			case extra != nil:
				undeclared(extra, x[k], p, out)
			case !open:
				*out = append(*out, p)
			}
		}
	case []any:
		for _, it := range itemSchemas(s) {
			for i, e := range x {
				undeclared(it, e, path+"["+itoa(i)+"]", out)
			}
		}
	}
}

// declared gathers the properties s and its branches name, the schema of
// additional properties if one is given, and whether extra keys are
// allowed outright.
func declared(s *openapi3.Schema) (props map[string][]*openapi3.Schema, extra *openapi3.Schema, open bool) {
	props = map[string][]*openapi3.Schema{}
	var walk func(s *openapi3.Schema, depth int)
	walk = func(s *openapi3.Schema, depth int) {
		if s == nil || depth > 16 {
			return
		}
		for k, ref := range s.Properties {
			if ref != nil && ref.Value != nil {
				props[k] = append(props[k], ref.Value)
			}
		}
		if ap := s.AdditionalProperties; ap.Schema != nil && ap.Schema.Value != nil {
			extra = ap.Schema.Value
		} else if ap.Has != nil && *ap.Has {
			open = true
		}
		for _, refs := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
			for _, r := range refs {
				if r != nil {
					walk(r.Value, depth+1)
				}
			}
		}
	}
	walk(s, 0)
	return props, extra, open
}

// itemSchemas is the items schema of s and of its branches.
func itemSchemas(s *openapi3.Schema) []*openapi3.Schema {
	var out []*openapi3.Schema
	if s.Items != nil && s.Items.Value != nil {
		out = append(out, s.Items.Value)
	}
	for _, refs := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
		for _, r := range refs {
			if r != nil && r.Value != nil {
				out = append(out, itemSchemas(r.Value)...)
			}
		}
	}
	return out
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// responseSchema is the JSON schema op documents for status.
func responseSchema(op *openapi3.Operation, status int) *openapi3.Schema {
	ref := op.Responses.Status(status)
	if ref == nil {
		ref = op.Responses.Default()
	}
	if ref == nil || ref.Value == nil {
		return nil
	}
	mt := ref.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		return nil
	}
	return mt.Schema.Value
}
