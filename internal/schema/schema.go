// Package schema validates resource specs against the schemas of HyperFleet's OpenAPI document, fills in their
// defaults, finds the fields only admins may write, and derives the public form of the document that the API serves.
//
// kin-openapi does the OpenAPI work; this package turns its errors into Violations with dotted field paths and
// messages meant for API users.
package schema

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"
)

// InternalExtension is the schema extension that marks a property as internal: set by HyperFleet or by admins,
// written by no one else, and left out of the public document. Only the boolean value true marks a property.
const InternalExtension = "x-hyperfleet-internal"

// ImmutableExtension is the schema extension that marks a property as fixed at create: a change to it (admins
// included) is refused. Only the boolean value true marks a property.
const ImmutableExtension = "x-hyperfleet-immutable"

// ErrUnknownSchema is returned, wrapped, by Document.Spec for a name that components/schemas does not define.
var ErrUnknownSchema = errors.New("no such schema in components/schemas")

// Document is a parsed and validated OpenAPI 3.0 document. It is immutable once Load returns it, so it and the
// Specs taken from it are safe for concurrent use.
type Document struct {
	doc        *openapi3.T
	publicYAML []byte
	publicJSON []byte
}

// Spec is one schema of a Document, against which resource specs are validated. Its methods are safe for
// concurrent use; those that take a value read it (ApplyDefaults also writes it) but keep no reference to it.
type Spec struct {
	name   string
	schema *openapi3.Schema
	// immutable holds the paths of the properties marked ImmutableExtension, found once by Document.Spec.
	immutable []string
	// hasInternal says whether any property reachable from the schema is marked InternalExtension.
	hasInternal bool
}

// Load parses raw (YAML or JSON), resolves its local $refs and validates it as an OpenAPI 3.0 document, with
// every schema default checked against its schema. It also derives the public document (see Public) and checks
// that it is valid too. External references (files, URLs) are not followed: the document must be self-contained.
// Load returns an error describing the first problem found.
func Load(raw []byte) (*Document, error) {
	doc, err := loadOpenAPI(raw)
	if err != nil {
		return nil, err
	}
	publicYAML, publicJSON, err := publicDocument(raw)
	if err != nil {
		return nil, fmt.Errorf("schema: deriving the public document: %w", err)
	}
	if _, err := loadOpenAPI(publicYAML); err != nil {
		return nil, fmt.Errorf("schema: the public document is invalid: %w", err)
	}
	return &Document{doc: doc, publicYAML: publicYAML, publicJSON: publicJSON}, nil
}

func loadOpenAPI(raw []byte) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("schema: parsing the OpenAPI document: %w", err)
	}
	// Validation uses kin-openapi's OpenAPI 3.0 validator; a 3.1 document would need its JSON Schema 2020-12
	// validator, whose errors have another shape, so it is refused rather than half-checked.
	if !doc.IsOpenAPI30() {
		return nil, fmt.Errorf("schema: OpenAPI version %q is not supported, only 3.0.x", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("schema: invalid OpenAPI document: %w", err)
	}
	return doc, nil
}

// Spec returns the schema named component in components/schemas. It returns an error wrapping ErrUnknownSchema,
// and naming component, if there is none.
func (d *Document) Spec(component string) (*Spec, error) {
	if d.doc.Components != nil {
		if ref := d.doc.Components.Schemas[component]; ref != nil && ref.Value != nil {
			var immutable []string
			collectImmutable(ref.Value, "", &immutable, nil)
			return &Spec{name: component, schema: ref.Value, immutable: immutable, hasInternal: anyInternal(ref.Value, nil)}, nil
		}
	}
	return nil, fmt.Errorf("schema %q: %w", component, ErrUnknownSchema)
}

// Public returns the document served to API users, as YAML and as JSON: the loaded document with every property
// marked InternalExtension removed, along with its name in the enclosing schema's required list, and with no
// InternalExtension left anywhere. The YAML keeps the source's key order and comments; the JSON keeps its key
// order. Both are computed by Load; each call returns fresh copies, which the caller may modify. err is always
// nil: Load fails instead when the public document cannot be derived.
func (d *Document) Public() (yamlDoc, jsonDoc []byte, err error) {
	return bytes.Clone(d.publicYAML), bytes.Clone(d.publicJSON), nil
}
