// Package api holds Platinum's wire contracts. openapi.yaml is the REST
// contract between ptd and its clients (the source of truth; ptd serves it
// at /v1/openapi.json); proto/ holds pt-agent's RPC contract.
package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"sync"

	"go.yaml.in/yaml/v3"
)

// OpenAPIYAML is the REST contract as written, OpenAPI 3.1 in YAML.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

// openAPIJSON converts once: the document is fixed at build time.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) { return yamlToJSON(OpenAPIYAML) })

// OpenAPIJSON returns the REST contract as JSON, as served at
// /v1/openapi.json. Keys keep the order of the YAML so the JSON reads like
// the source. The result is computed once and shared: do not modify it.
func OpenAPIJSON() ([]byte, error) { return openAPIJSON() }

// yamlToJSON converts a YAML document to JSON. It walks yaml.v3's node tree
// rather than decoding into maps, so key order is kept and scalars keep
// their YAML type (a quoted "200" stays a string, 200 is a number).
func yamlToJSON(src []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("openapi: parse yaml: %w", err)
	}
	var buf bytes.Buffer
	if err := writeNode(&buf, &doc); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return buf.Bytes(), nil
}

func writeNode(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("line %d: want one document, got %d", n.Line, len(n.Content))
		}
		return writeNode(buf, n.Content[0])
	case yaml.AliasNode:
		return writeNode(buf, n.Alias)
	case yaml.MappingNode:
		buf.WriteByte('{')
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: mapping key is not a scalar", k.Line)
			}
			if seen[k.Value] {
				return fmt.Errorf("line %d: duplicate key %q", k.Line, k.Value)
			}
			seen[k.Value] = true
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, k.Value); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeNode(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeNode(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		return writeScalar(buf, n)
	}
	return fmt.Errorf("line %d: unexpected YAML node kind %v", n.Line, n.Kind)
}

func writeScalar(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		buf.WriteString("null")
		return nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		return writeJSON(buf, b)
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		return writeJSON(buf, i)
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("line %d: %s has no JSON form", n.Line, n.Value)
		}
		return writeJSON(buf, f)
	default: // !!str, !!timestamp, !!binary: keep the text.
		return writeJSON(buf, n.Value)
	}
}

func writeJSON(buf *bytes.Buffer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf.Write(b)
	return nil
}
