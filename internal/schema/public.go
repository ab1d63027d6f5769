package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The public document is derived from the YAML node tree rather than from kin-openapi's model so that it keeps the
// source's key order, comments and flow style, and so that the validating model keeps its internal fields.

// maxJSONDepth bounds the nesting publicJSON follows, which YAML aliases could otherwise make unbounded.
const maxJSONDepth = 1000

// publicDocument returns raw without its internal properties, as YAML and as JSON. It fails if raw marks anything
// other than a property as internal, or marks one with something other than a boolean, since the result could
// then leak what the marker was meant to hide.
func publicDocument(raw []byte) (yamlDoc, jsonDoc []byte, err error) {
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, nil, fmt.Errorf("parsing YAML: %w", err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, nil, errors.New("the document is not a single YAML mapping")
	}
	top := root.Content[0]
	if err := stripDocument(top); err != nil {
		return nil, nil, err
	}
	if path, found := findKey(top, InternalExtension, ""); found {
		return nil, nil, fmt.Errorf("%s at %s: only a property's schema may carry it", InternalExtension, path)
	}

	var yamlBuf bytes.Buffer
	enc := yaml.NewEncoder(&yamlBuf)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, nil, fmt.Errorf("encoding YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, nil, fmt.Errorf("encoding YAML: %w", err)
	}

	var compact, jsonBuf bytes.Buffer
	if err := writeJSON(&compact, top, 0); err != nil {
		return nil, nil, fmt.Errorf("encoding JSON: %w", err)
	}
	if err := json.Indent(&jsonBuf, compact.Bytes(), "", "  "); err != nil {
		return nil, nil, fmt.Errorf("encoding JSON: %w", err)
	}
	return yamlBuf.Bytes(), jsonBuf.Bytes(), nil
}

// stripDocument removes internal properties from every schema reachable in the OpenAPI 3.0 document top without
// following $refs (each component is visited where it is defined).
func stripDocument(top *yaml.Node) error {
	if components := lookup(top, "components"); components != nil {
		for _, walk := range []struct {
			key  string
			each func(*yaml.Node, string) error
		}{
			{"schemas", stripSchema},
			{"parameters", stripParameter},
			{"headers", stripParameter},
			{"responses", stripResponse},
			{"requestBodies", stripContentHolder},
		} {
			if err := eachValue(lookup(components, walk.key), "components."+walk.key, walk.each); err != nil {
				return err
			}
		}
	}
	return eachValue(lookup(top, "paths"), "paths", stripPathItem)
}

func stripPathItem(item *yaml.Node, path string) error {
	if err := eachItem(lookup(item, "parameters"), path+".parameters", stripParameter); err != nil {
		return err
	}
	// The Path Item fields that hold an Operation in OpenAPI 3.0.
	for _, method := range []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"} {
		if err := stripOperation(lookup(item, method), path+"."+method); err != nil {
			return err
		}
	}
	return nil
}

func stripOperation(op *yaml.Node, path string) error {
	if op == nil {
		return nil
	}
	if err := eachItem(lookup(op, "parameters"), path+".parameters", stripParameter); err != nil {
		return err
	}
	if err := stripContentHolder(lookup(op, "requestBody"), path+".requestBody"); err != nil {
		return err
	}
	if err := eachValue(lookup(op, "responses"), path+".responses", stripResponse); err != nil {
		return err
	}
	return eachValue(lookup(op, "callbacks"), path+".callbacks", func(callback *yaml.Node, path string) error {
		return eachValue(callback, path, stripPathItem)
	})
}

// stripParameter handles Parameter and Header objects, which hold a schema or a content map.
func stripParameter(param *yaml.Node, path string) error {
	if err := stripSchema(lookup(param, "schema"), path+".schema"); err != nil {
		return err
	}
	return stripContentHolder(param, path)
}

func stripResponse(resp *yaml.Node, path string) error {
	if err := eachValue(lookup(resp, "headers"), path+".headers", stripParameter); err != nil {
		return err
	}
	return stripContentHolder(resp, path)
}

// stripContentHolder handles an object with a content map of media types (Request Body, Response, Parameter).
func stripContentHolder(holder *yaml.Node, path string) error {
	return eachValue(lookup(holder, "content"), path+".content", func(mediaType *yaml.Node, path string) error {
		return stripSchema(lookup(mediaType, "schema"), path+".schema")
	})
}

// stripSchema removes the internal properties of schema and of the schemas nested in it.
func stripSchema(schema *yaml.Node, path string) error {
	if schema == nil || schema.Kind != yaml.MappingNode {
		return nil
	}
	if props := lookup(schema, "properties"); props != nil && props.Kind == yaml.MappingNode {
		var removed []string
		kept := props.Content[:0:0]
		for i := 0; i+1 < len(props.Content); i += 2 {
			name, prop := props.Content[i], props.Content[i+1]
			internal, err := takeMarker(prop, path+".properties."+name.Value)
			if err != nil {
				return err
			}
			if internal {
				removed = append(removed, name.Value)
				continue
			}
			if err := stripSchema(prop, path+".properties."+name.Value); err != nil {
				return err
			}
			kept = append(kept, name, prop)
		}
		props.Content = kept
		if len(removed) > 0 {
			dropRequired(schema, removed)
		}
	}
	for _, key := range []string{"items", "additionalProperties", "not"} {
		if err := stripSchema(lookup(schema, key), path+"."+key); err != nil {
			return err
		}
	}
	for _, key := range []string{"allOf", "anyOf", "oneOf"} {
		if err := eachItem(lookup(schema, key), path+"."+key, stripSchema); err != nil {
			return err
		}
	}
	return nil
}

// takeMarker reports whether the property schema prop is marked internal, removing a false marker so that the
// public document carries none.
func takeMarker(prop *yaml.Node, path string) (bool, error) {
	if prop.Kind != yaml.MappingNode {
		return false, nil
	}
	for i := 0; i+1 < len(prop.Content); i += 2 {
		if prop.Content[i].Value != InternalExtension {
			continue
		}
		var internal bool
		if v := prop.Content[i+1]; v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" || v.Decode(&internal) != nil {
			return false, fmt.Errorf("%s at %s: want true or false", InternalExtension, path)
		}
		if !internal {
			prop.Content = slices.Delete(prop.Content, i, i+2)
		}
		return internal, nil
	}
	return false, nil
}

// dropRequired removes names from schema's required list, and the list itself if that empties it, since
// OpenAPI 3.0 requires a required list to be non-empty.
func dropRequired(schema *yaml.Node, names []string) {
	for i := 0; i+1 < len(schema.Content); i += 2 {
		if schema.Content[i].Value != "required" || schema.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		list := schema.Content[i+1]
		list.Content = slices.DeleteFunc(list.Content, func(n *yaml.Node) bool { return slices.Contains(names, n.Value) })
		if len(list.Content) == 0 {
			schema.Content = slices.Delete(schema.Content, i, i+2)
		}
		return
	}
}

// lookup returns the value of key in the mapping node m, or nil.
func lookup(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// eachValue calls f with every value of the mapping node m and its path.
func eachValue(m *yaml.Node, path string, f func(*yaml.Node, string) error) error {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if err := f(m.Content[i+1], path+"."+m.Content[i].Value); err != nil {
			return err
		}
	}
	return nil
}

// eachItem calls f with every item of the sequence node s and its path.
func eachItem(s *yaml.Node, path string, f func(*yaml.Node, string) error) error {
	if s == nil || s.Kind != yaml.SequenceNode {
		return nil
	}
	for i, item := range s.Content {
		if err := f(item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	return nil
}

// findKey returns the path of the first mapping key named key anywhere under n.
func findKey(n *yaml.Node, key, path string) (string, bool) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if k == key {
				return strings.TrimPrefix(path+"."+k, "."), true
			}
			if p, ok := findKey(n.Content[i+1], key, path+"."+k); ok {
				return p, true
			}
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			if p, ok := findKey(item, key, fmt.Sprintf("%s[%d]", path, i)); ok {
				return p, true
			}
		}
	}
	return "", false
}

// writeJSON writes the YAML node n to buf as JSON, keeping the order of mapping keys.
func writeJSON(buf *bytes.Buffer, n *yaml.Node, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("nested deeper than %d levels", maxJSONDepth)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return errors.New("a YAML document node without exactly one child")
		}
		return writeJSON(buf, n.Content[0], depth+1)
	case yaml.AliasNode:
		return writeJSON(buf, n.Alias, depth+1)
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].ShortTag() == "!!merge" {
				return fmt.Errorf("line %d: YAML merge keys are not supported", n.Content[i].Line)
			}
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSONScalar(buf, n.Content[i].Value); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeJSON(buf, n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, item := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, item, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			buf.WriteString("null")
			return nil
		case "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				return fmt.Errorf("line %d: %w", n.Line, err)
			}
			return writeJSONScalar(buf, v)
		default:
			return writeJSONScalar(buf, n.Value)
		}
	default:
		return fmt.Errorf("line %d: unexpected YAML node kind %v", n.Line, n.Kind)
	}
}

// writeJSONScalar writes v as JSON without escaping HTML characters, which are common in descriptions.
func writeJSONScalar(buf *bytes.Buffer, v any) error {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Write(bytes.TrimSuffix(tmp.Bytes(), []byte("\n")))
	return nil
}
