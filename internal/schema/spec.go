package schema

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/getkin/kin-openapi/openapi3"
)

// ApplyDefaults sets, in place, every absent property of value that has a schema default to a copy of that
// default, at every depth the value reaches: in nested objects, in array items, and in defaults just filled in
// (which get their own properties' defaults), internal properties included. A property whose value is null counts
// as absent, as in kin-openapi, matching JSON merge patch, where null removes a key. No default is created for an
// object the schema gives none, so the defaults inside such an object appear only once the value holds it.
//
// Violations of the schema are Validate's to report and do not stop ApplyDefaults, which fills defaults wherever
// the value's shape lets it. It returns an error, having possibly set some defaults, only if value is nil or
// cannot be validated at all (a number that is not finite, say).
func (s *Spec) ApplyDefaults(value map[string]any) error {
	if value == nil {
		return fmt.Errorf("schema %s: applying defaults to a nil map", s.name)
	}
	err := s.schema.VisitJSON(value,
		openapi3.MultiErrors(),
		openapi3.VisitAsRequest(),
		// Defaults are only set when this callback is given; there is nothing else to do on that.
		openapi3.DefaultsSet(func() {}),
		openapi3.DisableSchemaErrorDetails(),
	)
	for _, e := range flatten(err, nil) {
		var se *openapi3.SchemaError
		if !errors.As(e, &se) {
			return fmt.Errorf("schema %s: applying defaults: %w", s.name, e)
		}
	}
	return nil
}

// InternalFields returns the paths, in Violation.Field form and sorted by key at each level, of the properties
// present in value that the schema marks InternalExtension: true. A key counts as present whatever its value,
// null included, so that a JSON merge patch removing an internal field is caught too. It does not look inside an
// internal field, nor inside a value whose shape the schema does not expect; it does look through the objects and
// arrays that are not internal.
//
// A merge patch can still remove internal fields by nulling an object that holds them, which InternalFields does
// not report: the field it names is not internal.
func (s *Spec) InternalFields(value map[string]any) []string {
	var paths []string
	collectInternal(s.schema, value, nil, &paths)
	return paths
}

func collectInternal(schema *openapi3.Schema, value any, path fieldPathSegments, out *[]string) {
	switch v := value.(type) {
	case map[string]any:
		for _, key := range slices.Sorted(maps.Keys(v)) {
			keyPath := append(slices.Clip(path), segment{key: key})
			child, internal := propertySchema(schema, key, nil)
			if internal {
				*out = append(*out, keyPath.String())
				continue
			}
			if child != nil {
				collectInternal(child, v[key], keyPath, out)
			}
		}
	case []any:
		if schema.Items == nil || schema.Items.Value == nil {
			return
		}
		for i, item := range v {
			collectInternal(schema.Items.Value, item, append(slices.Clip(path), segment{index: i, isIndex: true}), out)
		}
	}
}

// InternalPaths returns the paths (property names from the top) of the internal properties, when every one of
// them is reached through object properties alone, so that removing those paths removes them all (PostgreSQL's
// jsonb #- does it as it reads a row). ok is false when an internal property sits in an array item or a map value,
// where no fixed path reaches it.
func (s *Spec) InternalPaths() (paths [][]string, ok bool) {
	ok = internalPaths(s.schema, nil, &paths, nil)
	return paths, ok
}

func internalPaths(schema *openapi3.Schema, prefix []string, out *[][]string, seen []*openapi3.Schema) bool {
	if schema == nil || slices.Contains(seen, schema) {
		return true
	}
	seen = append(seen, schema)
	for _, name := range slices.Sorted(maps.Keys(schema.Properties)) {
		ref := schema.Properties[name]
		path := append(slices.Clip(prefix), name)
		if isInternal(ref) {
			*out = append(*out, path)
			continue
		}
		if ref != nil && !internalPaths(ref.Value, path, out, seen) {
			return false
		}
	}
	for _, sub := range schema.AllOf {
		if sub != nil && !internalPaths(sub.Value, prefix, out, seen) {
			return false
		}
	}
	for _, sub := range slices.Concat(schema.AnyOf, schema.OneOf) {
		if sub != nil && anyInternal(sub.Value, nil) {
			return false
		}
	}
	if schema.Items != nil && anyInternal(schema.Items.Value, nil) {
		return false
	}
	if ap := schema.AdditionalProperties.Schema; ap != nil && anyInternal(ap.Value, nil) {
		return false
	}
	return true
}

// HasInternal reports whether the schema marks any property internal: when it does not, StripInternal never has
// anything to remove and callers may skip decoding a value for it.
func (s *Spec) HasInternal() bool { return s.hasInternal }

// StripInternal removes from value, in place, every property the schema marks internal, wherever InternalFields
// would find one, and reports whether it removed any: what the public document, which has no internal fields,
// lets a caller who may not see them be shown.
func (s *Spec) StripInternal(value map[string]any) bool {
	return stripInternal(s.schema, value)
}

func stripInternal(schema *openapi3.Schema, value any) bool {
	removed := false
	switch v := value.(type) {
	case map[string]any:
		for key, child := range v {
			childSchema, internal := propertySchema(schema, key, nil)
			switch {
			case internal:
				delete(v, key)
				removed = true
			case childSchema != nil:
				removed = stripInternal(childSchema, child) || removed
			}
		}
	case []any:
		if schema.Items == nil || schema.Items.Value == nil {
			return false
		}
		for _, item := range v {
			removed = stripInternal(schema.Items.Value, item) || removed
		}
	}
	return removed
}

func anyInternal(schema *openapi3.Schema, seen []*openapi3.Schema) bool {
	if schema == nil || slices.Contains(seen, schema) {
		return false
	}
	seen = append(seen, schema)
	for _, ref := range schema.Properties {
		if isInternal(ref) || (ref != nil && anyInternal(ref.Value, seen)) {
			return true
		}
	}
	for _, sub := range slices.Concat(schema.AllOf, schema.AnyOf, schema.OneOf) {
		if sub != nil && anyInternal(sub.Value, seen) {
			return true
		}
	}
	if schema.Items != nil && anyInternal(schema.Items.Value, seen) {
		return true
	}
	if ap := schema.AdditionalProperties.Schema; ap != nil && anyInternal(ap.Value, seen) {
		return true
	}
	return false
}

// ImmutableFields returns the dotted paths (e.g. "hosted_cluster.services") of the properties the schema marks
// ImmutableExtension: true, sorted. It follows object properties (and allOf), not array items or additional
// properties: a property inside an array is fixed by marking the array.
func (s *Spec) ImmutableFields() []string { return slices.Clone(s.immutable) }

func collectImmutable(schema *openapi3.Schema, prefix string, out *[]string, seen []*openapi3.Schema) {
	if schema == nil || slices.Contains(seen, schema) {
		return
	}
	seen = append(seen, schema)
	for _, name := range slices.Sorted(maps.Keys(schema.Properties)) {
		ref := schema.Properties[name]
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if hasExtension(ref, ImmutableExtension) {
			*out = append(*out, path)
			continue
		}
		if ref.Value != nil {
			collectImmutable(ref.Value, path, out, seen)
		}
	}
	for _, sub := range schema.AllOf {
		if sub != nil {
			collectImmutable(sub.Value, prefix, out, seen)
		}
	}
	slices.Sort(*out)
}

// hasExtension reports whether a property's schema carries the boolean marker ext, itself or beside its $ref.
func hasExtension(ref *openapi3.SchemaRef, ext string) bool {
	if v, ok := ref.Extensions[ext].(bool); ok && v {
		return true
	}
	if ref.Value == nil {
		return false
	}
	v, ok := ref.Value.Extensions[ext].(bool)
	return ok && v
}

// propertySchema returns the schema that applies to the property name of an object schema and whether any of the
// schema's definitions of name is internal. It looks into allOf, anyOf and oneOf too, since the public document
// drops an internal property wherever it is defined, and falls back on additionalProperties.
func propertySchema(schema *openapi3.Schema, name string, seen []*openapi3.Schema) (*openapi3.Schema, bool) {
	if schema == nil || slices.Contains(seen, schema) {
		return nil, false
	}
	seen = append(seen, schema)
	var found *openapi3.Schema
	if ref := schema.Properties[name]; ref != nil {
		if isInternal(ref) {
			return nil, true
		}
		found = ref.Value
	}
	for _, sub := range slices.Concat(schema.AllOf, schema.AnyOf, schema.OneOf) {
		if sub == nil {
			continue
		}
		child, internal := propertySchema(sub.Value, name, seen)
		if internal {
			return nil, true
		}
		if found == nil {
			found = child
		}
	}
	if found == nil && schema.Properties[name] == nil {
		if ap := schema.AdditionalProperties; ap.Schema != nil && (ap.Has == nil || *ap.Has) {
			found = ap.Schema.Value
		}
	}
	return found, false
}

// isInternal reports whether a property's schema carries the internal marker, itself or beside its $ref.
func isInternal(ref *openapi3.SchemaRef) bool { return hasExtension(ref, InternalExtension) }

// IsInternal reports whether the property at path (property names from the top), or a property enclosing it, is
// marked internal, following properties, allOf/anyOf/oneOf and additionalProperties as StripInternal does: what a
// caller who may not see internal fields may not name either, in a search or anywhere else. A path the schema
// does not describe is not internal.
func (s *Spec) IsInternal(path []string) bool {
	schema := s.schema
	for _, name := range path {
		child, internal := propertySchema(schema, name, nil)
		if internal {
			return true
		}
		if child == nil {
			return false
		}
		schema = child
	}
	return false
}
