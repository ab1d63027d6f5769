package httpapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// exactMembers checks that every member name in raw that encoding/json matched to a field of t is the field's
// name exactly: the decoder matches names without regard to case, so {"NAME": …} or {"Spec": …} would otherwise
// be taken for name and spec, while the document's names (and every other JSON tool) are case-sensitive. It
// follows struct fields and slice items; maps and raw JSON have names of their own and are left to their checks.
// raw has been decoded into t already, so it is valid JSON of t's shape.
func exactMembers(raw json.RawMessage, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil // decodes itself (time.Time, json.RawMessage): no member names of ours
	}
	switch t.Kind() {
	case reflect.Struct:
		var members map[string]json.RawMessage // nil for null
		if err := json.Unmarshal(raw, &members); err != nil {
			return malformed(err) // not reached: raw decoded into t, so it is an object or null
		}
		for _, name := range slices.Sorted(maps.Keys(members)) {
			value := members[name]
			field, ok := fieldNamed(t, name)
			if !ok {
				where := strings.TrimPrefix(path+"."+name, ".")
				return &resource.Error{Code: resource.CodeMalformed,
					Message: fmt.Sprintf("unknown member %q: member names are case-sensitive", where),
					Fields:  []resource.FieldError{{Field: where, Message: "unknown member (names are case-sensitive)"}}}
			}
			if err := exactMembers(value, field.Type, strings.TrimPrefix(path+"."+name, ".")); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte, a base64 string
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return malformed(err) // not reached, as above
		}
		for i, item := range items {
			if err := exactMembers(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	default:
	}
	return nil
}

// fieldNamed returns the field of struct t whose JSON name is exactly name.
func fieldNamed(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
