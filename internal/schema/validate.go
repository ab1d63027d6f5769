package schema

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Violation is one way in which a value breaks its schema.
type Violation struct {
	// Field is the path from the spec root to the offending field: object keys joined by dots, array indexes in
	// brackets, e.g. "hosted_cluster.dns.base_domain", "replicas", "services[2].type"; "" for the root itself.
	// Keys are written as they are, unescaped, so an unknown field's key containing a dot reads as two steps.
	Field string
	// Message says what is wrong, for API users, e.g. "is required", "unknown field", "must be >= 0",
	// "must be one of [None Agent KubeVirt]". It never quotes the value, which may be secret.
	Message string
}

// Validate checks value, a spec decoded by encoding/json, against the schema and returns every violation found,
// or nil if there are none. Violations are sorted by Field (array indexes numerically), and those of one field
// keep kin-openapi's order, so the same value always yields the same list. Validate does not modify value.
func (s *Spec) Validate(value map[string]any) []Violation {
	// DisableSchemaErrorDetails keeps the value (possibly secret) out of any error message, and keeps
	// SchemaError.Error from marshalling the value, which it would panic on if it could not.
	err := s.schema.VisitJSON(value, openapi3.MultiErrors(), openapi3.DisableSchemaErrorDetails())
	if err == nil {
		return nil
	}
	var found []located
	add := func(path fieldPathSegments, msg string) {
		found = append(found, located{Violation: Violation{Field: path.String(), Message: msg}, path: path})
	}
	seenObjects := make(map[string]bool)
	for _, e := range flatten(err, nil) {
		var se *openapi3.SchemaError
		if !errors.As(e, &se) {
			add(nil, e.Error())
			continue
		}
		tokens := se.JSONPointer()
		path := fieldPath(value, tokens)
		if se.SchemaField != "properties" || se.Schema == nil {
			add(path, message(se))
			continue
		}
		// kin-openapi reports each unsupported property at its object, naming the key only in prose, so the keys
		// are recovered from the object and the schema instead; once per object, as all its errors look alike.
		objectKey := strings.Join(tokens, "\x00")
		if seenObjects[objectKey] {
			continue
		}
		seenObjects[objectKey] = true
		obj, _ := se.Value.(map[string]any)
		unknown := 0
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			if _, known := se.Schema.Properties[key]; !known {
				add(append(slices.Clip(path), segment{key: key}), "unknown field")
				unknown++
			}
		}
		if unknown == 0 { // Not expected, but an error must not vanish.
			add(path, message(se))
		}
	}
	slices.SortStableFunc(found, func(a, b located) int { return a.path.compare(b.path) })
	violations := make([]Violation, len(found))
	for i, f := range found {
		violations[i] = f.Violation
	}
	return violations
}

// located is a Violation with its path kept in parts, for sorting.
type located struct {
	Violation
	path fieldPathSegments
}

// segment is one step of a field path: an object key or, if isIndex, an array index.
type segment struct {
	key     string
	index   int
	isIndex bool
}

func (s segment) text() string {
	if s.isIndex {
		return strconv.Itoa(s.index)
	}
	return s.key
}

type fieldPathSegments []segment

// String renders the path as Violation.Field does.
func (p fieldPathSegments) String() string {
	var b strings.Builder
	for _, s := range p {
		switch {
		case s.isIndex:
			fmt.Fprintf(&b, "[%d]", s.index)
		case b.Len() > 0:
			b.WriteByte('.')
			b.WriteString(s.key)
		default:
			b.WriteString(s.key)
		}
	}
	return b.String()
}

// compare orders paths segment by segment, indexes numerically, a path before those it is a prefix of.
func (p fieldPathSegments) compare(q fieldPathSegments) int {
	for i := range min(len(p), len(q)) {
		a, b := p[i], q[i]
		c := strings.Compare(a.text(), b.text())
		if a.isIndex && b.isIndex {
			c = a.index - b.index
		}
		if c != 0 {
			return c
		}
	}
	return len(p) - len(q)
}

// fieldPath turns the JSON pointer tokens of an error into a path, telling indexes from keys by walking value,
// since a pointer writes both the same way.
func fieldPath(value map[string]any, tokens []string) fieldPathSegments {
	path := make(fieldPathSegments, 0, len(tokens))
	var cur any = value
	for _, tok := range tokens {
		switch c := cur.(type) {
		case []any:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(c) {
				path = append(path, segment{index: i, isIndex: true})
				cur = c[i]
				continue
			}
		case map[string]any:
			path = append(path, segment{key: tok})
			cur = c[tok]
			continue
		}
		path = append(path, segment{key: tok})
		cur = nil
	}
	return path
}

// flatten appends to out the errors within err, looking through kin-openapi's MultiErrors.
func flatten(err error, out []error) []error {
	if err == nil {
		return out
	}
	// A type assertion, not errors.As: MultiError's As method would also match the MultiErrors that some
	// SchemaErrors wrap (for oneOf and allOf), losing the SchemaError that explains them.
	if me, ok := err.(openapi3.MultiError); ok { //nolint:errorlint // see above
		for _, e := range me {
			out = flatten(e, out)
		}
		return out
	}
	return append(out, err)
}

// message phrases a kin-openapi schema error for API users, from the schema rather than from kin-openapi's prose.
func message(se *openapi3.SchemaError) string {
	if s := se.Schema; s != nil {
		switch se.SchemaField {
		case "required":
			return "is required"
		case "enum":
			return fmt.Sprintf("must be one of %v", s.Enum)
		case "type":
			return typeMessage(s)
		case "nullable":
			return "must not be null"
		case "minimum":
			if s.Min != nil {
				return "must be >= " + formatNumber(*s.Min)
			}
		case "maximum":
			if s.Max != nil {
				return "must be <= " + formatNumber(*s.Max)
			}
		case "exclusiveMinimum":
			if bound := exclusiveBound(s.ExclusiveMin, s.Min); bound != nil {
				return "must be > " + formatNumber(*bound)
			}
		case "exclusiveMaximum":
			if bound := exclusiveBound(s.ExclusiveMax, s.Max); bound != nil {
				return "must be < " + formatNumber(*bound)
			}
		case "multipleOf":
			if s.MultipleOf != nil {
				return "must be a multiple of " + formatNumber(*s.MultipleOf)
			}
		case "minLength":
			return fmt.Sprintf("must be at least %d characters long", s.MinLength)
		case "maxLength":
			if s.MaxLength != nil {
				return fmt.Sprintf("must be at most %d characters long", *s.MaxLength)
			}
		case "pattern":
			return "must match the pattern " + s.Pattern
		case "format":
			return "must be a valid " + s.Format
		case "minItems":
			return fmt.Sprintf("must have at least %d items", s.MinItems)
		case "maxItems":
			if s.MaxItems != nil {
				return fmt.Sprintf("must have at most %d items", *s.MaxItems)
			}
		case "uniqueItems":
			return "must not contain duplicate items"
		case "minProperties":
			return fmt.Sprintf("must have at least %d fields", s.MinProps)
		case "maxProperties":
			if s.MaxProps != nil {
				return fmt.Sprintf("must have at most %d fields", *s.MaxProps)
			}
		}
	}
	if se.Reason != "" {
		return se.Reason
	}
	return fmt.Sprintf("does not satisfy the schema's %q", se.SchemaField)
}

func typeMessage(s *openapi3.Schema) string {
	types := s.Type.Slice()
	if len(types) != 1 {
		return "must be one of the types " + strings.Join(types, ", ")
	}
	switch t := types[0]; t {
	case openapi3.TypeArray, openapi3.TypeObject, openapi3.TypeInteger:
		return "must be an " + t
	default:
		return "must be a " + t
	}
}

// exclusiveBound returns the bound of an exclusiveMinimum or exclusiveMaximum: its own value in OpenAPI 3.1 style,
// or the inclusive bound it modifies in OpenAPI 3.0 style.
func exclusiveBound(eb openapi3.ExclusiveBound, inclusive *float64) *float64 {
	if eb.Value != nil {
		return eb.Value
	}
	return inclusive
}

func formatNumber(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}
